//go:build cgo && !noflite

package tts

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/stages/tts/remote"
	"github.com/voiced/voiced/internal/stages/tts/ttstest"
)

func TestNewFlite(t *testing.T) {
	reg := prometheus.NewRegistry()
	e, err := New(Config{}, quiet, reg)
	require.NoError(t, err)
	require.Equal(t, "flite", e.Name())
	require.Equal(t, []string{"slt", "kal", "awb", "rms"}, e.Voices())
	require.Equal(t, []int{8000, 16000, 22050, 24000, 44100, 48000}, e.SampleRates())

	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	before := e.Estimate("", 100)
	res, err := e.Synthesize(ctx, Request{Text: sentence, SampleRate: 8000}, func([]int16) {})
	require.NoError(t, err)
	require.Equal(t, "slt", res.Voice, "the default voice")
	require.NotEqual(t, before, e.Estimate("", 100), "learned from one sentence")
	require.Equal(t, before, e.Estimate("kal", 100))
	require.Equal(t, 1, testutil.CollectAndCount(e.m.rtf))
	require.Positive(t, testutil.ToFloat64(e.m.chunks.WithLabelValues("flite")))

	_, err = e.Synthesize(ctx, Request{Text: "", SampleRate: 8000}, func([]int16) {})
	require.ErrorIs(t, err, ErrEmpty)
	require.Equal(t, 1.0, testutil.ToFloat64(e.m.failures.WithLabelValues("flite", "empty")))

	k, err := New(Config{Voice: "kal"}, quiet, nil)
	require.NoError(t, err)
	require.Equal(t, []string{"kal", "slt", "awb", "rms"}, k.Voices())
	_, err = New(Config{Voice: "alloy"}, quiet, nil)
	require.ErrorIs(t, err, ErrVoice)
	_, err = New(Config{}, quiet, reg)
	require.Error(t, err, "metrics registered twice")
}

// The remote engine as configured falls back to the real Flite.
func TestNewRemoteFallsBackToFlite(t *testing.T) {
	srv := ttstest.New()
	defer srv.Close()
	srv.SetFault(ttstest.ServerError)
	e, err := New(Config{Engine: "remote", Remote: remote.Config{BaseURL: srv.URL + "/v1"}}, quiet, prometheus.NewRegistry())
	require.NoError(t, err)
	require.Equal(t, "remote", e.Name())
	require.Equal(t, []string{"alloy"}, e.Voices())
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	var n int
	res, err := e.Synthesize(ctx, Request{Text: sentence, SampleRate: 16000}, func(p []int16) { n += len(p) })
	require.NoError(t, err)
	require.Equal(t, "flite", res.Engine)
	require.Equal(t, "slt", res.Voice)
	require.Equal(t, res.Samples, n)
	require.NotEmpty(t, res.Words)
	require.Equal(t, 1.0, testutil.ToFloat64(e.m.fallbacks.WithLabelValues("remote", "transient")))
}
