// Package wav reads and writes the WAV files voiced's tools and adapters
// exchange: 16-bit PCM, as RIFF WAVE. Encode writes mono; Decode reads any
// number of channels and mixes them down to mono.
package wav

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
)

// ErrFormat is wrapped by every error about a file's content.
var ErrFormat = errors.New("wav: unsupported content")

// Encode wraps 16-bit mono PCM at rate in a WAV header.
func Encode(pcm []int16, rate int) []byte {
	data := 2 * len(pcm)
	b := make([]byte, 0, 44+data)
	b = append(b, "RIFF"...)
	b = binary.LittleEndian.AppendUint32(b, uint32(36+data))
	b = append(b, "WAVEfmt "...)
	b = binary.LittleEndian.AppendUint32(b, 16)
	b = binary.LittleEndian.AppendUint16(b, 1) // PCM
	b = binary.LittleEndian.AppendUint16(b, 1) // mono
	b = binary.LittleEndian.AppendUint32(b, uint32(rate))
	b = binary.LittleEndian.AppendUint32(b, uint32(2*rate))
	b = binary.LittleEndian.AppendUint16(b, 2)
	b = binary.LittleEndian.AppendUint16(b, 16)
	b = append(b, "data"...)
	b = binary.LittleEndian.AppendUint32(b, uint32(data))
	for _, s := range pcm {
		b = binary.LittleEndian.AppendUint16(b, uint16(s))
	}
	return b
}

// Decode reads a 16-bit PCM WAV stream and returns its samples, mixed down
// to mono, and its sample rate. Chunks other than fmt and data are
// skipped; a data chunk whose size says 0xFFFFFFFF, or 0 (as a streaming
// writer leaves it) runs to the end of the stream, unless the RIFF header's
// size says that more chunks follow an empty one. A file that declares a
// sample rate of 0 is refused.
func Decode(r io.Reader) (pcm []int16, rate int, err error) {
	riffSize, err := readRIFFHeader(r)
	if err != nil {
		return nil, 0, err
	}
	// The RIFF size counts from byte 8; pos is the offset of the next
	// chunk, for a data chunk of size 0 to tell a real empty chunk (more
	// chunks declared after it) from a streaming writer's placeholder.
	riffEnd := 8 + int64(riffSize)
	pos := int64(riffHeaderSize)
	channels := 0
	for {
		var ch [8]byte
		if _, err := io.ReadFull(r, ch[:]); err != nil {
			return nil, 0, fmt.Errorf("%w: no data chunk", ErrFormat)
		}
		id, size := string(ch[0:4]), binary.LittleEndian.Uint32(ch[4:8])
		pos += int64(len(ch)) + int64(size) + int64(size%2)
		switch id {
		case "fmt ":
			if channels, rate, err = readFmt(r, size); err != nil {
				return nil, 0, err
			}
		case "data":
			if channels == 0 {
				return nil, 0, fmt.Errorf("%w: data chunk before fmt chunk", ErrFormat)
			}
			toEnd := size == math.MaxUint32 || size == 0 && (pos >= riffEnd || riffSize == math.MaxUint32)
			data, err := readData(r, size, toEnd)
			if err != nil {
				return nil, 0, err
			}
			return mixDown(data, channels), rate, nil
		default:
			if _, err := io.CopyN(io.Discard, r, int64(size)+int64(size%2)); err != nil {
				return nil, 0, fmt.Errorf("%w: short %q chunk: %v", ErrFormat, id, err)
			}
		}
	}
}

// riffHeaderSize is the length of the RIFF header, "RIFF", its size and
// "WAVE": where the first chunk starts.
const riffHeaderSize = 12

// readRIFFHeader reads the RIFF header and returns the size it declares,
// which Decode needs to tell an empty data chunk from a placeholder.
func readRIFFHeader(r io.Reader) (riffSize uint32, err error) {
	var hdr [riffHeaderSize]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return 0, fmt.Errorf("%w: no RIFF header: %v", ErrFormat, err)
	}
	if string(hdr[0:4]) != "RIFF" || string(hdr[8:12]) != "WAVE" {
		return 0, fmt.Errorf("%w: not a RIFF WAVE file", ErrFormat)
	}
	return binary.LittleEndian.Uint32(hdr[4:8]), nil
}

// readFmt reads the body of a fmt chunk of size bytes (and its pad byte)
// and returns its channels and sample rate, refusing anything but 16-bit
// PCM at a rate above 0. The size is bounded before the read so that a
// file cannot make Decode allocate what it declares rather than what it
// holds.
func readFmt(r io.Reader, size uint32) (channels, rate int, err error) {
	if size < 16 || size > 1024 {
		return 0, 0, fmt.Errorf("%w: fmt chunk of %d bytes", ErrFormat, size)
	}
	b := make([]byte, size+size%2)
	if _, err := io.ReadFull(r, b); err != nil {
		return 0, 0, fmt.Errorf("%w: short fmt chunk: %v", ErrFormat, err)
	}
	format, bits := binary.LittleEndian.Uint16(b[0:]), binary.LittleEndian.Uint16(b[14:])
	channels, rate = int(binary.LittleEndian.Uint16(b[2:])), int(binary.LittleEndian.Uint32(b[4:]))
	// 0xFFFE is WAVE_FORMAT_EXTENSIBLE, which many tools write
	// for plain PCM too.
	if format != 1 && format != 0xFFFE {
		return 0, 0, fmt.Errorf("%w: format %d, want PCM (1)", ErrFormat, format)
	}
	if bits != 16 || channels < 1 {
		return 0, 0, fmt.Errorf("%w: %d channels of %d bits, want 16-bit", ErrFormat, channels, bits)
	}
	if rate == 0 {
		// Callers divide by the rate (durations, resampling).
		return 0, 0, fmt.Errorf("%w: sample rate 0", ErrFormat)
	}
	return channels, rate, nil
}

// readData reads a data chunk of size bytes, and with toEnd the rest of
// the stream too: a streaming writer cannot know the size when it writes
// the header. The reads are bounded by what the stream holds, never by
// the size declared.
func readData(r io.Reader, size uint32, toEnd bool) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, int64(size)))
	if err == nil && toEnd {
		var rest []byte
		rest, err = io.ReadAll(r)
		data = append(data, rest...)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: reading data: %v", ErrFormat, err)
	}
	return data, nil
}

// mixDown averages interleaved 16-bit little-endian frames of channels
// samples into mono; a trailing partial frame is dropped.
func mixDown(data []byte, channels int) []int16 {
	pcm := make([]int16, len(data)/2/channels)
	for i := range pcm {
		sum := 0
		for c := range channels {
			sum += int(int16(binary.LittleEndian.Uint16(data[2*(i*channels+c):])))
		}
		pcm[i] = int16(sum / channels)
	}
	return pcm
}
