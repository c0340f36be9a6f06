package wav

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/require"
)

// file builds a WAV stream by hand: a fmt chunk (format, channels, rate,
// bits), then extra chunks, then data of the given declared size.
func file(format, channels uint16, rate uint32, bits uint16, extra []byte, declared uint32, samples ...int16) []byte {
	var b []byte
	b = append(b, "RIFF\x00\x00\x00\x00WAVE"...)
	b = append(b, "fmt "...)
	b = binary.LittleEndian.AppendUint32(b, 16)
	b = binary.LittleEndian.AppendUint16(b, format)
	b = binary.LittleEndian.AppendUint16(b, channels)
	b = binary.LittleEndian.AppendUint32(b, rate)
	b = binary.LittleEndian.AppendUint32(b, rate*uint32(channels)*2)
	b = binary.LittleEndian.AppendUint16(b, channels*2)
	b = binary.LittleEndian.AppendUint16(b, bits)
	b = append(b, extra...)
	b = append(b, "data"...)
	b = binary.LittleEndian.AppendUint32(b, declared)
	for _, s := range samples {
		b = binary.LittleEndian.AppendUint16(b, uint16(s))
	}
	return b
}

func TestDecode(t *testing.T) {
	list := append([]byte("LIST\x03\x00\x00\x00abc"), 0) // odd size, padded
	tests := []struct {
		name     string
		in       []byte
		wantPCM  []int16
		wantRate int
		wantErr  string
	}{
		{"round trip", Encode([]int16{0, 1, -1, 32767, -32768}, 22050), []int16{0, 1, -1, 32767, -32768}, 22050, ""},
		{"empty", Encode(nil, 8000), []int16{}, 8000, ""},
		{"stereo mixed down", file(1, 2, 16000, 16, nil, 8, 100, 300, -50, -150), []int16{200, -100}, 16000, ""},
		{"extensible format", file(0xFFFE, 1, 48000, 16, nil, 4, 7, 8), []int16{7, 8}, 48000, ""},
		{"other chunks skipped", file(1, 1, 16000, 16, list, 4, 5, 6), []int16{5, 6}, 16000, ""},
		{"streamed: size 0", file(1, 1, 16000, 16, nil, 0, 1, 2, 3), []int16{1, 2, 3}, 16000, ""},
		{"streamed: size max", file(1, 1, 16000, 16, nil, 0xFFFFFFFF, 1, 2), []int16{1, 2}, 16000, ""},
		{"not RIFF", []byte("RIFX\x00\x00\x00\x00WAVE"), nil, 0, "not a RIFF WAVE"},
		{"too short", []byte("RIFF"), nil, 0, "no RIFF header"},
		{"not PCM", file(3, 1, 16000, 32, nil, 4, 1, 2), nil, 0, "format 3"},
		{"8-bit", file(1, 1, 8000, 8, nil, 2, 1), nil, 0, "of 8 bits"},
		// Found by FuzzDecode: a zero rate was returned as if valid.
		{"sample rate 0", file(1, 1, 0, 16, nil, 2, 1), nil, 0, "sample rate 0"},
		{"no data", Encode([]int16{1}, 16000)[:36], nil, 0, "no data chunk"},
		{"data before fmt", []byte("RIFF\x00\x00\x00\x00WAVEdata\x02\x00\x00\x00\x01\x00"), nil, 0, "before fmt"},
		{"short fmt", file(1, 1, 16000, 16, nil, 2, 1)[:30], nil, 0, "short fmt chunk"},
		{"fmt too small", []byte("RIFF\x00\x00\x00\x00WAVEfmt \x0e\x00\x00\x00"), nil, 0, "fmt chunk of 14 bytes"},
		{"short other chunk", append(file(1, 1, 16000, 16, nil, 2, 1)[:36], "LIST\x08\x00\x00\x00ab"...), nil, 0, `short "LIST" chunk`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pcm, rate, err := Decode(bytes.NewReader(tt.in))
			if tt.wantErr != "" {
				require.ErrorIs(t, err, ErrFormat)
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.wantRate, rate)
			require.Equal(t, tt.wantPCM, pcm)
		})
	}
}

// TestDecodeReadError: a reader failing inside the data chunk is a
// refused file, not a short one.
func TestDecodeReadError(t *testing.T) {
	in := file(1, 1, 16000, 16, nil, 8, 1, 2)
	_, _, err := Decode(io.MultiReader(bytes.NewReader(in), iotest.ErrReader(errors.New("disk gone"))))
	require.ErrorIs(t, err, ErrFormat)
	require.ErrorContains(t, err, "reading data: disk gone")
}

func TestEncodeHeader(t *testing.T) {
	b := Encode([]int16{1, 2, 3}, 16000)
	require.Len(t, b, 44+6)
	require.Equal(t, "RIFF", string(b[:4]))
	require.Equal(t, uint32(36+6), binary.LittleEndian.Uint32(b[4:]))
	require.Equal(t, uint32(32000), binary.LittleEndian.Uint32(b[28:]), "byte rate")
	require.Equal(t, uint32(6), binary.LittleEndian.Uint32(b[40:]), "data size")
}
