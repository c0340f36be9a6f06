package pipeline_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/cancel"
	"github.com/voiced/voiced/internal/pipeline"
)

// TestDegradationsCountOnlyAnswers: voiced_degradations_total counts
// "degraded answers by reason". A request that degraded early (retrieval
// failed) and was then interrupted while the LLM streamed gave no answer:
// it must not be counted as a degraded one.
func TestDegradationsCountOnlyAnswers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &stages{
			retrieve: func(context.Context) ([]pipeline.Passage, error) { return nil, errors.New("index down") },
			generate: func(ctx context.Context, emit func(string)) (pipeline.Generation, error) {
				emit("It ships ")
				<-ctx.Done()
				return pipeline.Generation{}, context.Cause(ctx)
			},
		}
		reg := prometheus.NewPedanticRegistry()
		p, err := pipeline.New(pipeline.Config{}, pipeline.Stages{STT: st, Intent: st, Retrieval: st, LLM: st, Templates: templ{}},
			pipeline.NewMetrics(reg))
		require.NoError(t, err)
		ctx, cancelR := context.WithCancelCause(t.Context())
		defer cancelR(nil)
		dctx, cancelD := context.WithTimeoutCause(ctx, 1500*time.Millisecond, cancel.RequestDeadline)
		defer cancelD()
		time.AfterFunc(200*time.Millisecond, func() { cancelR(cancel.Interrupted) })
		s := newSink()
		p.Run(ctx, pipeline.Request{Audio: queue(pipeline.Frame{PCM: []int16{1}, SampleRate: 16000, Final: true}),
			Log: discard, Final: closedWith(dctx)}, s)
		require.ErrorIs(t, s.err, cancel.Interrupted)
		require.NoError(t, testutil.CollectAndCompare(reg, strings.NewReader(""), "voiced_degradations_total"),
			"no answer, so no degraded answer")
	})
}

// TestDegradationsCountOnlySentAnswers: a degraded result that the sink
// did not deliver (a cancel or the request's deadline ended the request
// first, and its terminal went out instead) answered nothing, and is not
// counted; one delivered is.
func TestDegradationsCountOnlySentAnswers(t *testing.T) {
	for _, tc := range []struct {
		name string
		lost bool
		want string
	}{
		{"delivered", false, `
# HELP voiced_degradations_total Degraded answers by reason (requests that ended in an error, or whose result was not sent, are not answers and not counted).
# TYPE voiced_degradations_total counter
voiced_degradations_total{reason="retrieval_failed"} 1
`},
		{"lost to the request's end", true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				st := &stages{retrieve: func(context.Context) ([]pipeline.Passage, error) { return nil, errors.New("index down") }}
				reg := prometheus.NewPedanticRegistry()
				p, err := pipeline.New(pipeline.Config{}, pipeline.Stages{STT: st, Intent: st, Retrieval: st, LLM: st, Templates: templ{}},
					pipeline.NewMetrics(reg))
				require.NoError(t, err)
				ctx, cancelD := context.WithTimeoutCause(t.Context(), 1500*time.Millisecond, cancel.RequestDeadline)
				defer cancelD()
				s := newSink()
				s.lost = tc.lost
				p.Run(ctx, pipeline.Request{Audio: queue(pipeline.Frame{PCM: []int16{1}, SampleRate: 16000, Final: true}),
					Log: discard, Final: closedWith(ctx)}, s)
				require.NoError(t, s.err)
				require.Equal(t, []string{pipeline.ReasonRetrievalFailed}, s.res.Degradation)
				require.NoError(t, testutil.CollectAndCompare(reg, strings.NewReader(tc.want), "voiced_degradations_total"))
			})
		})
	}
}
