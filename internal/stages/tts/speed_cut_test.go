package tts

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
)

// slowSynth is an embedded engine slower than the speed the engine
// assumes for it: perChar of synthesis per character, stopped by its
// context like Flite.
type slowSynth struct{ perChar time.Duration }

func (slowSynth) Name() string     { return EngineFlite }
func (slowSynth) Voices() []string { return []string{"slt"} }
func (s slowSynth) Synthesize(ctx context.Context, req Request, emit func([]int16)) (Result, error) {
	start := time.Now()
	res := Result{Engine: EngineFlite, Voice: "slt", SampleRate: req.SampleRate, Chars: len(req.Text), TextLen: len(req.Text)}
	t := time.NewTimer(time.Duration(len(req.Text)) * s.perChar)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		res.Elapsed = time.Since(start)
		return res, context.Cause(ctx)
	}
	emit(make([]int16, req.SampleRate/10))
	res.Samples, res.Chunks, res.Complete = req.SampleRate/10, 1, true
	res.Elapsed = time.Since(start)
	return res, nil
}

// TestEstimateLearnsFromCutSyntheses: an engine slower than its estimate
// whose every sentence is cut by the speech budget is never seen to
// finish, and only finished syntheses taught the speed: the estimate
// stayed as optimistic as it started, so the pipeline went on starting
// sentences that cannot finish (audio cut mid-sentence instead of
// stopping at a sentence boundary) and the LLM went on sizing answers by
// a speed the engine does not have. A synthesis cut after d without
// finishing its chars shows that the engine's speed is below chars/d.
func TestEstimateLearnsFromCutSyntheses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, err := newMetrics(nil)
		require.NoError(t, err)
		// 50 chars/s where 200 are assumed: 40 chars take 800 ms, the
		// estimate says 200 ms.
		e := &Engine{syn: slowSynth{perChar: 20 * time.Millisecond}, name: EngineFlite, alpha: 0.2, m: m,
			speeds: map[string]*speed{}, voices: []string{"slt"}}
		text := "Your order shipped on Monday, it's here."
		require.Len(t, text, 40)
		budget := 500 * time.Millisecond
		require.Less(t, e.Estimate("", len(text)), budget, "the first sentence is started: the estimate fits")
		for range 20 {
			ctx, cancel := context.WithTimeout(t.Context(), budget)
			_, err := e.Synthesize(ctx, Request{Text: text, SampleRate: 16000}, func([]int16) {})
			cancel()
			require.ErrorIs(t, err, context.DeadlineExceeded)
		}
		require.GreaterOrEqual(t, e.Estimate("", len(text)), budget*9/10,
			"after 20 sentences cut at %v, 40 characters are no longer expected in %v", budget, e.Estimate("", len(text)))
	})
}
