package wav

import (
	"bytes"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/fuzzcheck"
)

// FuzzDecode decodes arbitrary files. Refused ones fail with ErrFormat;
// accepted ones have a sample rate, no more samples than the file has
// bytes for, and decode the same once written again by Encode. Memory
// follows the file's size, not the chunk sizes it declares.
func FuzzDecode(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		var (
			pcm  []int16
			rate int
			err  error
		)
		// The samples and the data read are twice the input at most.
		fuzzcheck.AllocBounded(t, len(data), 8, func() { pcm, rate, err = Decode(bytes.NewReader(data)) })
		if err != nil {
			require.True(t, errors.Is(err, ErrFormat), "error does not wrap ErrFormat: %v", err)
			require.Nil(t, pcm)
			return
		}
		require.Positive(t, rate)
		// A header is 44 bytes at least, and every sample has two bytes.
		require.LessOrEqual(t, 44+2*len(pcm), len(data), "more samples than the file holds")

		again, gotRate, err := Decode(bytes.NewReader(Encode(pcm, rate)))
		require.NoError(t, err)
		require.Equal(t, rate, gotRate)
		require.Equal(t, pcm, again)
	})
}
