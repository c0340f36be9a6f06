//go:build !cgo || noflite

package tts

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/stages/tts/remote"
	"github.com/voiced/voiced/internal/stages/tts/ttstest"
)

// Without cgo the embedded engine is unavailable, and the remote one runs
// without a fallback.
func TestWithoutCgo(t *testing.T) {
	_, err := New(Config{}, quiet, nil)
	require.ErrorIs(t, err, ErrUnavailable)

	srv := ttstest.New()
	defer srv.Close()
	srv.SetFault(ttstest.ServerError)
	e, err := New(Config{Engine: "remote", Remote: remote.Config{BaseURL: srv.URL + "/v1"}}, quiet, nil)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	_, err = e.Synthesize(ctx, Request{Text: sentence, SampleRate: 16000}, func([]int16) {})
	require.Error(t, err)
}
