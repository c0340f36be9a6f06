package tts

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
)

// lateRemote is a healthy remote engine whose first audio comes after
// firstByte (a normal round trip), then the whole sentence at once.
type lateRemote struct{ firstByte time.Duration }

func (lateRemote) Name() string     { return EngineRemote }
func (lateRemote) Voices() []string { return []string{"alloy"} }
func (r lateRemote) Synthesize(ctx context.Context, req Request, emit func([]int16)) (Result, error) {
	res := Result{Engine: EngineRemote, Voice: "alloy", SampleRate: req.SampleRate, Chars: len(req.Text), TextLen: len(req.Text)}
	t := time.NewTimer(r.firstByte)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		return res, context.Cause(ctx)
	}
	emit(make([]int16, req.SampleRate/10))
	res.Samples, res.Chunks, res.Complete, res.Elapsed = req.SampleRate/10, 1, true, r.firstByte
	return res, nil
}

// TestReserveAbandonIsNoOutage: a sentence started with little time left
// gives the remote engine only the time Flite does not need, and a
// healthy remote that answers in 200 ms is abandoned for Flite there: a
// matter of this sentence's deadline, not a failure of the remote. It
// put the remote in its cooldown all the same, so every session's
// sentences went to Flite for the next 10 s (and one late sentence per
// answer keeps a healthy remote out for good).
func TestReserveAbandonIsNoOutage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, err := newMetrics(nil)
		require.NoError(t, err)
		sec := &fakeSynth{voices: []string{"slt"}}
		e := &Engine{name: EngineRemote, alpha: 0.2, m: m, speeds: map[string]*speed{}, voices: []string{"alloy"}}
		e.syn = newFallback(lateRemote{firstByte: 200 * time.Millisecond}, sec, 10*time.Second, e.observe, e.estimate, m)
		// A remote learned fast enough to be expected to finish the
		// sentence in time (29/290 s = 100 ms), so it is started.
		e.speeds[EngineRemote+"/alloy"] = newSpeed(290, 0.2)

		// 300 ms left; Flite is expected to need 29/200 s = 145 ms: the
		// remote gets 135 ms, and is abandoned.
		ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
		res, err := e.Synthesize(ctx, Request{Text: sentence, SampleRate: 16000}, func([]int16) {})
		cancel()
		require.NoError(t, err)
		require.Equal(t, EngineFlite, res.Engine, "abandoned for Flite, which has time to speak it")
		require.Zero(t, testutil.ToFloat64(m.fallbacks.WithLabelValues(EngineRemote, "no_time")), "the remote was started")

		// The next sentence, with time enough: the remote is healthy.
		ctx, cancel = context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		res, err = e.Synthesize(ctx, Request{Text: sentence, SampleRate: 16000}, func([]int16) {})
		require.NoError(t, err)
		require.Equal(t, EngineRemote, res.Engine, "a remote abandoned for one sentence's deadline is not in a cooldown")
		require.Zero(t, testutil.ToFloat64(m.fallbacks.WithLabelValues(EngineRemote, "cooldown")))
	})
}
