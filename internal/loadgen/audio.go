package loadgen

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"time"

	"github.com/voiced/voiced/internal/protocol"
)

// FrameDuration is the length of one audio frame sent.
const FrameDuration = 20 * time.Millisecond

// Utterance is audio to send as one request.
type Utterance struct {
	Name       string
	SampleRate int
	Samples    []int16
}

// Duration is the utterance's length.
func (u Utterance) Duration() time.Duration {
	return time.Duration(len(u.Samples)) * time.Second / time.Duration(u.SampleRate)
}

// Frames cuts the utterance into 20 ms frames; the last may be shorter.
// An empty utterance is one empty frame, so that it still makes a
// request.
func (u Utterance) Frames() [][]int16 {
	n := u.SampleRate / int(time.Second/FrameDuration)
	var fs [][]int16
	for i := 0; i < len(u.Samples); i += n {
		fs = append(fs, u.Samples[i:min(i+n, len(u.Samples))])
	}
	if len(fs) == 0 {
		fs = append(fs, nil)
	}
	return fs
}

// Synthetic returns a d long utterance at 16 kHz: a 220 Hz tone with its
// harmonics in light noise, loud enough for a voice activity detector.
func Synthetic(d time.Duration, seed uint64) Utterance {
	const rate = protocol.DefaultSampleRate
	n := int(d * rate / time.Second)
	rng := rand.New(rand.NewPCG(seed, 1))
	s := make([]int16, n)
	for i := range s {
		t := float64(i) / rate
		v := 0.25*math.Sin(2*math.Pi*220*t) + 0.12*math.Sin(2*math.Pi*440*t) + 0.06*math.Sin(2*math.Pi*660*t)
		v += 0.03 * rng.NormFloat64()
		s[i] = int16(max(-1, min(1, v)) * math.MaxInt16)
	}
	return Utterance{Name: fmt.Sprintf("synthetic-%v", d), SampleRate: rate, Samples: s}
}

// ErrWAV is wrapped by every error about a WAV file's content.
var ErrWAV = errors.New("unsupported WAV")

// LoadWAV reads a WAV file of 16-bit PCM mono at a sample rate protocol
// v1 supports.
func LoadWAV(path string) (Utterance, error) {
	f, err := os.Open(path)
	if err != nil {
		return Utterance{}, fmt.Errorf("load wav: %w", err)
	}
	defer f.Close()
	u, err := ReadWAV(f)
	if err != nil {
		return Utterance{}, fmt.Errorf("load wav %s: %w", path, err)
	}
	u.Name = path
	return u, nil
}

// ReadWAV parses a RIFF WAVE stream of 16-bit PCM mono.
func ReadWAV(r io.Reader) (Utterance, error) {
	var hdr [12]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return Utterance{}, fmt.Errorf("%w: no RIFF header: %v", ErrWAV, err)
	}
	if string(hdr[0:4]) != "RIFF" || string(hdr[8:12]) != "WAVE" {
		return Utterance{}, fmt.Errorf("%w: not a RIFF WAVE file", ErrWAV)
	}
	var (
		u      Utterance
		gotFmt bool
	)
	for {
		var ch [8]byte
		if _, err := io.ReadFull(r, ch[:]); err != nil {
			return Utterance{}, fmt.Errorf("%w: no data chunk", ErrWAV)
		}
		id, size := string(ch[0:4]), binary.LittleEndian.Uint32(ch[4:8])
		switch id {
		case "fmt ":
			if size < 16 || size > 1024 {
				return Utterance{}, fmt.Errorf("%w: fmt chunk of %d bytes", ErrWAV, size)
			}
			b := make([]byte, size+size%2)
			if _, err := io.ReadFull(r, b); err != nil {
				return Utterance{}, fmt.Errorf("%w: short fmt chunk: %v", ErrWAV, err)
			}
			format, channels := binary.LittleEndian.Uint16(b[0:]), binary.LittleEndian.Uint16(b[2:])
			rate, bits := binary.LittleEndian.Uint32(b[4:]), binary.LittleEndian.Uint16(b[14:])
			// 0xFFFE is WAVE_FORMAT_EXTENSIBLE, which many tools write
			// for plain PCM too.
			if format != 1 && format != 0xFFFE {
				return Utterance{}, fmt.Errorf("%w: format %d, want PCM (1)", ErrWAV, format)
			}
			if channels != 1 || bits != 16 {
				return Utterance{}, fmt.Errorf("%w: %d channels of %d bits, want mono 16-bit", ErrWAV, channels, bits)
			}
			if !protocol.SampleRateSupported(int(rate)) {
				return Utterance{}, fmt.Errorf("%w: sample rate %d, want one of %v", ErrWAV, rate, protocol.SupportedSampleRates)
			}
			u.SampleRate, gotFmt = int(rate), true
		case "data":
			if !gotFmt {
				return Utterance{}, fmt.Errorf("%w: data chunk before fmt chunk", ErrWAV)
			}
			// A streamed WAV may declare 0 or 0xFFFFFFFF: read to the end.
			data, err := io.ReadAll(io.LimitReader(r, int64(size)))
			if err != nil {
				return Utterance{}, fmt.Errorf("%w: reading data: %v", ErrWAV, err)
			}
			if size == 0 || size == math.MaxUint32 {
				rest, err := io.ReadAll(r)
				if err != nil {
					return Utterance{}, fmt.Errorf("%w: reading data: %v", ErrWAV, err)
				}
				data = append(data, rest...)
			}
			u.Samples = make([]int16, len(data)/2)
			for i := range u.Samples {
				u.Samples[i] = int16(binary.LittleEndian.Uint16(data[2*i:]))
			}
			if len(u.Samples) == 0 {
				return Utterance{}, fmt.Errorf("%w: no samples", ErrWAV)
			}
			return u, nil
		default:
			if _, err := io.CopyN(io.Discard, r, int64(size)+int64(size%2)); err != nil {
				return Utterance{}, fmt.Errorf("%w: short %q chunk: %v", ErrWAV, id, err)
			}
		}
	}
}

// WriteWAV writes u as a 16-bit PCM mono WAV file, for tests and for
// saving the synthetic utterance.
func WriteWAV(w io.Writer, u Utterance) error {
	data := 2 * len(u.Samples)
	b := make([]byte, 0, 44+data)
	b = append(b, "RIFF"...)
	b = binary.LittleEndian.AppendUint32(b, uint32(36+data))
	b = append(b, "WAVEfmt "...)
	b = binary.LittleEndian.AppendUint32(b, 16)
	b = binary.LittleEndian.AppendUint16(b, 1)
	b = binary.LittleEndian.AppendUint16(b, 1)
	b = binary.LittleEndian.AppendUint32(b, uint32(u.SampleRate))
	b = binary.LittleEndian.AppendUint32(b, uint32(2*u.SampleRate))
	b = binary.LittleEndian.AppendUint16(b, 2)
	b = binary.LittleEndian.AppendUint16(b, 16)
	b = append(b, "data"...)
	b = binary.LittleEndian.AppendUint32(b, uint32(data))
	for _, s := range u.Samples {
		b = binary.LittleEndian.AppendUint16(b, uint16(s))
	}
	_, err := w.Write(b)
	return err
}
