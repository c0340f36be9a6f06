//go:build !cgo || noflite

package flite

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/stages/tts/speech"
)

// Without cgo the engine reports itself unavailable, saying what to do.
func TestUnavailableWithoutCgo(t *testing.T) {
	_, err := New(Config{})
	require.ErrorIs(t, err, speech.ErrUnavailable)
	require.ErrorIs(t, err, ErrNoCgo)
	require.ErrorContains(t, err, "flite1-dev")
}
