package pipeline_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/cancel"
	"github.com/voiced/voiced/internal/pipeline"
)

// TestStageErrorAtItsDeadlineIsItsTimeout: an engine that keeps its own
// time by the stage's deadline (an HTTP client's timeout set from it)
// gives up with an error of its own right at that deadline, maybe before
// the stage context's timer has fired: which of the two goroutines runs
// first is the scheduler's. Taken for a failure, a classifier's or a
// recognizer's timeout failed the whole request, and an LLM's was logged
// and reported as llm_failed, where running out of a stage's budget only
// degrades the answer. Each round is one such race.
func TestStageErrorAtItsDeadlineIsItsTimeout(t *testing.T) {
	errEngine := errors.New("engine: timeout awaiting response")
	atDeadline := func(ctx context.Context) error {
		d, _ := ctx.Deadline()
		time.Sleep(time.Until(d)) // its own timer, due with the context's
		return errEngine
	}
	for _, tc := range []struct {
		stage  string
		reason string
		st     func() *stages
	}{
		{pipeline.StageSTT, pipeline.ReasonSTTTimeout, func() *stages {
			return &stages{finish: func(ctx context.Context) (string, error) { return "", atDeadline(ctx) }}
		}},
		{pipeline.StageIntent, pipeline.ReasonIntentTimeout, func() *stages {
			return &stages{classify: func(ctx context.Context) (pipeline.Intent, error) { return pipeline.Intent{}, atDeadline(ctx) }}
		}},
		{pipeline.StageLLM, pipeline.ReasonLLMTimeout, func() *stages {
			return &stages{generate: func(ctx context.Context, _ func(string)) (pipeline.Generation, error) {
				return pipeline.Generation{}, atDeadline(ctx)
			}}
		}},
	} {
		t.Run(tc.stage, func(t *testing.T) {
			const rounds = 100
			var wrong []string
			for range rounds {
				synctest.Test(t, func(t *testing.T) {
					st := tc.st()
					reg := prometheus.NewPedanticRegistry()
					p, err := pipeline.New(pipeline.Config{}, pipeline.Stages{STT: st, Intent: st, Retrieval: st, LLM: st, Templates: templ{}},
						pipeline.NewMetrics(reg))
					require.NoError(t, err)
					ctx, cancelD := context.WithTimeoutCause(t.Context(), 2*time.Second, cancel.RequestDeadline)
					defer cancelD()
					s := newSink()
					p.Run(ctx, pipeline.Request{Audio: queue(pipeline.Frame{PCM: []int16{1, 2}, SampleRate: 16000, Final: true}),
						Log: slog.New(slog.DiscardHandler)}, s)
					switch {
					case s.err != nil:
						wrong = append(wrong, fmt.Sprintf("failed: %v", s.err))
					case !slices.Contains(s.res.Degradation, tc.reason):
						wrong = append(wrong, fmt.Sprintf("degraded %v", s.res.Degradation))
					case stageOutcomes(t, reg)[tc.stage+"/timeout"] != 1:
						wrong = append(wrong, fmt.Sprintf("counted %v", stageOutcomes(t, reg)))
					}
				})
			}
			require.Empty(t, wrong[:min(len(wrong), 3)], "of %d rounds, %d took the stage's timeout for a failure", rounds, len(wrong))
		})
	}
}
