package wav

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestEmptyDataChunkBeforeMetadata: a complete, correctly sized WAV file
// holding no samples, with a metadata chunk after its data chunk (where
// many editors put LIST/INFO and id3 chunks). Its RIFF size says exactly
// where the file ends, so the data chunk's size of 0 is a real 0, not a
// streaming writer's placeholder; Decode used to read the metadata
// chunk's bytes as audio.
func TestEmptyDataChunkBeforeMetadata(t *testing.T) {
	b := Encode(nil, 16000) // RIFF size 36, data size 0: a proper empty file
	b = append(b, "LIST"...)
	b = binary.LittleEndian.AppendUint32(b, 14)
	b = append(b, "INFOISFT\x06\x00\x00\x00voiced"...)
	binary.LittleEndian.PutUint32(b[4:], uint32(len(b)-8)) // the RIFF size covers the LIST chunk
	pcm, rate, err := Decode(bytes.NewReader(b))
	require.NoError(t, err)
	require.Equal(t, 16000, rate)
	require.Empty(t, pcm, "the LIST chunk decoded as samples")
}

// TestStreamingPlaceholders: a streaming writer that cannot seek back
// leaves the sizes as placeholders, and the data then runs to the end of
// the stream, whatever the RIFF size says when it says nothing more.
func TestStreamingPlaceholders(t *testing.T) {
	for _, tc := range []struct {
		name       string
		riff, data uint32
	}{
		{"riff 0, data 0", 0, 0},
		{"riff max, data 0", 0xFFFFFFFF, 0},
		{"riff max, data max", 0xFFFFFFFF, 0xFFFFFFFF},
		{"riff of the empty header, data 0", 36, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := Encode(nil, 8000)
			binary.LittleEndian.PutUint32(b[4:], tc.riff)
			binary.LittleEndian.PutUint32(b[40:], tc.data)
			b = binary.LittleEndian.AppendUint16(b, 7)
			b = binary.LittleEndian.AppendUint16(b, 0xFFFF)
			pcm, rate, err := Decode(bytes.NewReader(b))
			require.NoError(t, err)
			require.Equal(t, 8000, rate)
			require.Equal(t, []int16{7, -1}, pcm)
		})
	}
}
