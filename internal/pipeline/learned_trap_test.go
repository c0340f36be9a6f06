package pipeline_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/pipeline"
)

// TestLearnedMinimumComesBackDown: a cheap LLM (the extractive responder)
// had a few slow runs (a load spike: a GC pause, a busy CPU), so its
// learned minimum rose to the configured one. Once the spike is over, a
// client whose requests leave it less than that minimum has it skipped,
// and a skipped stage is never measured: its minimum stays up for ever,
// even after an hour without a request, and the cheap stage is never run
// again although there is time for it ("a cheap embedded stage runs
// whenever there is time for it").
func TestLearnedMinimumComesBackDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		slow := true
		st := &stages{generate: func(ctx context.Context, emit func(string)) (pipeline.Generation, error) {
			if slow {
				if err := sleepCtx(ctx, 150*time.Millisecond); err != nil {
					return pipeline.Generation{}, err
				}
			}
			emit("It ships today.")
			return pipeline.Generation{Provider: "extractive"}, nil
		}}
		p, err := pipeline.New(pipeline.Config{}, pipeline.Stages{STT: st, Intent: st, Retrieval: st, LLM: st, Templates: templ{}}, nil)
		require.NoError(t, err)
		// The spike: 16 slow runs on generous budgets.
		for range 16 {
			s, _ := runOn(t, p, time.Second)
			require.Empty(t, s.res.Degradation)
		}
		require.Equal(t, 120*time.Millisecond, p.Minimums()[pipeline.StageLLM], "learned from the slow runs, capped by the flag")
		slow = false
		// Thin budgets: 100 ms left for an LLM that now takes no time.
		s, _ := runOn(t, p, 200*time.Millisecond)
		require.Equal(t, []string{pipeline.ReasonLLMSkipped}, s.res.Degradation)

		// An hour without a request, then the same thin requests: the
		// cost learned an hour ago must not keep the cheap stage out.
		time.Sleep(time.Hour)
		var last *sink
		for range 200 {
			last, _ = runOn(t, p, 200*time.Millisecond)
		}
		require.Empty(t, last.res.Degradation, "a cheap LLM with 100 ms left runs")
		require.Equal(t, "It ships today.", last.res.Answer)
	})
}
