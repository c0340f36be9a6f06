//go:build cgo && !nosphinx

package sphinx

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/pipeline"
)

// Every utterance is counted once in voiced_stt_utterances_total, by how
// it ended (docs/architecture.md: ok, deadline, canceled, overloaded,
// bad_audio, error), including those that end in Write (too long, cut
// short by their context) or are closed without Finish (a request
// cancelled mid-stream, replaced, its client gone), and a Finish handed
// a context whose deadline has passed counts as deadline, not canceled.
func TestEveryUtteranceCountedOnceByOutcome(t *testing.T) {
	skipWithoutModels(t)
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	e, err := New(ctx, Config{Decoders: 1, LM: LMGeneral, MaxUtterance: 2 * time.Second}, nil, quiet, prometheus.NewRegistry())
	require.NoError(t, err)
	defer e.Close()
	count := func(outcome string) float64 { return testutil.ToFloat64(e.utterances.WithLabelValues(outcome)) }
	pcm, rate := synth(t, "flite-slt", "where is my order")

	// Longer than MaxUtterance: Write refuses it as bad audio.
	r, err := e.Start(ctx, 16000)
	require.NoError(t, err)
	_, err = r.Write(ctx, make([]int16, 16000*3))
	require.ErrorIs(t, err, pipeline.ErrBadAudio)
	require.NoError(t, r.Close())
	require.Equal(t, 1.0, count("bad_audio"), "an utterance refused as too long in Write")

	// Cancelled mid-stream and closed without Finish.
	uctx, ucancel := context.WithCancel(ctx)
	r, err = e.Start(uctx, rate)
	require.NoError(t, err)
	_, err = r.Write(uctx, pcm[:len(pcm)/2])
	require.NoError(t, err)
	ucancel()
	_, err = r.Write(uctx, pcm[len(pcm)/2:])
	require.ErrorIs(t, err, context.Canceled)
	require.NoError(t, r.Close())
	require.Equal(t, 1.0, count("canceled"), "an utterance cancelled mid-stream")

	// Finish with a deadline already past.
	r, err = e.Start(ctx, rate)
	require.NoError(t, err)
	_, err = r.Write(ctx, pcm)
	require.NoError(t, err)
	dctx, dcancel := context.WithDeadline(ctx, time.Now().Add(-time.Millisecond))
	defer dcancel()
	_, err = r.Finish(dctx)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.NoError(t, r.Close())
	require.Equal(t, 1.0, count("deadline"), "Finish past its deadline")
	require.Equal(t, 1.0, count("canceled"))

	// A finished utterance is counted once, not again by Close.
	_, _, err = stream(ctx, e, pcm, rate)
	require.NoError(t, err)
	require.Equal(t, 1.0, count("ok"))
	require.Equal(t, 1.0, count("canceled"))
	require.Equal(t, 1.0, count("bad_audio"))
	require.Equal(t, 1.0, count("deadline"))
}
