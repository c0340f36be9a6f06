package pipeline_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/cancel"
	"github.com/voiced/voiced/internal/pipeline"
	"github.com/voiced/voiced/internal/voicedtest"
)

// fallbackSpeaker is a remote synthesiser with a faster fallback (Flite):
// Estimate is the remote's (estPerChar a character), the
// fallback speaks a sentence the remote cannot finish in time, and
// MinEstimate is the fallback's expected time (minPerChar a character).
type fallbackSpeaker struct {
	fakeSpeaker
	minPerChar time.Duration
}

func (f *fallbackSpeaker) MinEstimate(chars int) time.Duration {
	return time.Duration(chars) * f.minPerChar
}

// TestSpeechAdmitsWhatTheFallbackCanSay: with 400 ms of speech budget, the
// remote engine is expected to need 580 ms for the first sentence, but its
// Flite fallback 29 ms (and the fallback takes a sentence the remote
// cannot make in time). The sentences must be spoken, not skipped because
// the remote's estimate does not fit.
func TestSpeechAdmitsWhatTheFallbackCanSay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sp := &fallbackSpeaker{fakeSpeaker: fakeSpeaker{perChar: time.Millisecond, estPerChar: 20 * time.Millisecond},
			minPerChar: time.Millisecond}
		s := runSpeech(t, &stages{generate: streamed}, sp, 500*time.Millisecond, 0, 0)
		require.NoError(t, s.err)
		require.Empty(t, s.res.Degradation, "the fallback has time for every sentence")
		require.Len(t, s.res.Speech.Spoken, 2)
	})
}

// TestSpeechTimingEndsWithTheSpeech: timings.tts is "from its start beside
// the answer generator to its last audio". Speech stops after the first
// sentence (no time for the second, by its estimate) while the LLM goes on
// for 400 ms: the stage's time is that of its audio, not the LLM's.
func TestSpeechTimingEndsWithTheSpeech(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gen := func(ctx context.Context, emit func(string)) (pipeline.Generation, error) {
			emit("Your order shipped. ")
			emit("It arrives on Friday, unless the carrier is late again this week. ")
			if err := sleepCtx(ctx, 400*time.Millisecond); err != nil {
				return pipeline.Generation{}, err
			}
			emit("Bye.")
			return pipeline.Generation{Provider: "fake"}, nil
		}
		sp := &fakeSpeaker{perChar: time.Millisecond / 10, estPerChar: 30 * time.Millisecond}
		s := runSpeech(t, &stages{generate: gen}, sp, 3*time.Second, 0, 0)
		require.NoError(t, s.err)
		require.Equal(t, []string{pipeline.ReasonSpeechTruncated}, s.res.Degradation)
		require.Len(t, s.res.Speech.Spoken, 1)
		last := s.audio[len(s.audio)-2].at // the last chunk with samples; the final one follows
		tts, ok := s.res.Timings[pipeline.StageTTS]
		require.True(t, ok)
		require.GreaterOrEqual(t, s.res.LLMStarted.Add(tts), last, "the stage lasts to its last audio")
		require.Less(t, tts, 50*time.Millisecond, "speech ended after its first sentence, not with the LLM (400 ms)")
	})
}

// stageOutcomes counts voiced_stage_duration_seconds observations by
// "stage/outcome".
func stageOutcomes(t *testing.T, reg prometheus.Gatherer) map[string]uint64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	out := map[string]uint64{}
	for _, mf := range mfs {
		if mf.GetName() != "voiced_stage_duration_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			var stage, outcome string
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "stage":
					stage = l.GetValue()
				case "outcome":
					outcome = l.GetValue()
				}
			}
			out[stage+"/"+outcome] += m.GetHistogram().GetSampleCount()
		}
	}
	return out
}

// TestIntentFailureIsNoRetrievalFailure: a failing intent fails the
// request and its errgroup cancels retrieval. Retrieval did not fail: the
// log must not say "retrieval failed" with the intent's error.
func TestIntentFailureIsNoRetrievalFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		errBoom := errors.New("classifier exploded")
		st := &stages{
			classify: func(ctx context.Context) (pipeline.Intent, error) {
				// Fails once retrieval is under way.
				if err := sleepCtx(ctx, 10*time.Millisecond); err != nil {
					return pipeline.Intent{}, err
				}
				return pipeline.Intent{}, errBoom
			},
			retrieve: func(ctx context.Context) ([]pipeline.Passage, error) {
				return nil, sleepCtx(ctx, time.Hour)
			},
		}
		reg := prometheus.NewPedanticRegistry()
		p, err := pipeline.New(pipeline.Config{}, pipeline.Stages{STT: st, Intent: st, Retrieval: st, LLM: st, Templates: templ{}},
			pipeline.NewMetrics(reg))
		require.NoError(t, err)
		var logs voicedtest.LogBuffer
		ctx, cancelD := context.WithTimeoutCause(t.Context(), time.Second, cancel.RequestDeadline)
		defer cancelD()
		s := newSink()
		p.Run(ctx, pipeline.Request{Audio: queue(pipeline.Frame{PCM: []int16{1, 2}, SampleRate: 16000, Final: true}),
			Log: slog.New(slog.NewTextHandler(&logs, nil))}, s)
		require.ErrorIs(t, s.err, errBoom)
		require.NotContains(t, logs.String(), "retrieval failed", "retrieval was cancelled by the intent's failure, it did not fail")
		require.Equal(t, map[string]uint64{"intent/error": 1, "retrieval/cancelled": 1, "stt/ok": 1}, stageOutcomes(t, reg),
			"retrieval is counted as cancelled, not failed")
	})
}
