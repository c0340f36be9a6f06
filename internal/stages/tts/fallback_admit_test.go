package tts

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
)

// streamingRemote is a remote engine that streams: its first chunk comes
// after 10 ms, the rest of the sentence at 60 characters a second (the
// speed the engine assumes for a remote), stopped by its context.
type streamingRemote struct{ calls atomic.Int32 }

func (*streamingRemote) Name() string     { return EngineRemote }
func (*streamingRemote) Voices() []string { return []string{"alloy"} }
func (r *streamingRemote) Synthesize(ctx context.Context, req Request, emit func([]int16)) (Result, error) {
	r.calls.Add(1)
	start := time.Now()
	res := Result{Engine: EngineRemote, Voice: "alloy", SampleRate: req.SampleRate, Chars: len(req.Text), TextLen: len(req.Text)}
	wait := func(d time.Duration) error {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			return nil
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	for i, d := range []time.Duration{10 * time.Millisecond, timeFor(len(req.Text), 60)} {
		if err := wait(d); err != nil {
			res.Elapsed = time.Since(start)
			return res, err
		}
		emit(make([]int16, req.SampleRate/10))
		res.Samples, res.Chunks = res.Samples+req.SampleRate/10, i+1
	}
	res.Complete, res.Elapsed = true, time.Since(start)
	return res, nil
}

func newFallbackEngine(t *testing.T, primary Synthesizer) (*Engine, *fakeSynth) {
	t.Helper()
	m, err := newMetrics(nil)
	require.NoError(t, err)
	sec := &fakeSynth{voices: []string{"slt"}}
	e := &Engine{name: EngineRemote, alpha: 0.2, m: m, speeds: map[string]*speed{}, voices: []string{"alloy"}}
	e.syn = newFallback(primary, sec, 10*time.Second, e.observe, e.estimate, m)
	return e, sec
}

// TestMinEstimateCountsTheFallback: the pipeline starts a sentence only
// if the engine can be expected to finish it in the time left. With the
// remote engine that is the remote's estimate or, when less, Flite's:
// a sentence the remote cannot finish in time is Flite's to speak.
// Comparing the remote's estimate alone skipped the speech that Flite
// had time for.
func TestMinEstimateCountsTheFallback(t *testing.T) {
	e, _ := newFallbackEngine(t, &streamingRemote{})
	remote, flite := timeFor(100, initialCPS[EngineRemote]), timeFor(100, initialCPS[EngineFlite])
	require.Equal(t, remote, e.Estimate("", 100), "the answer is sized for the engine that speaks it when it can")
	require.Equal(t, flite, e.MinEstimate("", 100), "Flite can say it sooner")
	require.Equal(t, flite, e.MinEstimate("alloy", 100))

	// Flite alone, or a remote without a fallback: its own estimate.
	solo := &Engine{syn: &fakeSynth{voices: []string{"slt"}}, name: EngineFlite, alpha: 0.2, m: e.m,
		speeds: map[string]*speed{}, voices: []string{"slt"}}
	require.Equal(t, solo.Estimate("", 100), solo.MinEstimate("", 100))
}

// TestFallbackSpeaksWhatTheRemoteCannotFinish: a sentence with 300 ms
// left, which the remote engine is expected to need 483 ms for and Flite
// 145 ms. The remote's first chunk comes at once, so waiting for it does
// not abandon it, and it was then cut mid-sentence at the deadline; Flite
// would have said all of it. The remote is not started on a sentence it
// is not expected to finish when Flite is.
func TestFallbackSpeaksWhatTheRemoteCannotFinish(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &streamingRemote{}
		e, sec := newFallbackEngine(t, r)
		ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
		defer cancel()
		require.LessOrEqual(t, e.MinEstimate("", len(sentence)), 300*time.Millisecond, "the pipeline starts the sentence")
		res, err := e.Synthesize(ctx, Request{Text: sentence, SampleRate: 16000}, func([]int16) {})
		require.NoError(t, err, "spoken to its end")
		require.Equal(t, EngineFlite, res.Engine)
		require.Zero(t, r.calls.Load(), "the remote was not started")
		require.Len(t, sec.requests(), 1)
		require.Equal(t, 1.0, testutil.ToFloat64(e.m.fallbacks.WithLabelValues(EngineRemote, "no_time")))

		// With time for it, the remote speaks.
		ctx, cancel = context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		res, err = e.Synthesize(ctx, Request{Text: sentence, SampleRate: 16000}, func([]int16) {})
		require.NoError(t, err)
		require.Equal(t, EngineRemote, res.Engine)
	})
}
