package pipeline_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/cancel"
	"github.com/voiced/voiced/internal/pipeline"
)

// slowLinkSink takes each chunk only after wait (the session waits for
// the client's link before it queues a chunk).
type slowLinkSink struct {
	*sink
	wait time.Duration
}

func (s slowLinkSink) AnswerAudio(ctx context.Context, pcm []int16, rate int, final bool) bool {
	if !final && sleepCtx(ctx, s.wait) != nil {
		return false
	}
	return s.sink.AnswerAudio(ctx, pcm, rate, final)
}

// Speech.FirstAudio (the result's speech.firstAudioMs: "to the first
// answer.audio queued") is when the sink took the first chunk. It was
// taken before the sink was called, and a chunk that waited for a slow
// link was reported as queued before it was.
func TestSpeechFirstAudioIsWhenTheSinkTookIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, err := pipeline.New(pipeline.Config{}, pipeline.Stages{STT: &stages{}, Intent: &stages{}, Retrieval: &stages{},
			LLM: &stages{generate: streamed}, Templates: templ{}}, nil)
		require.NoError(t, err)
		ctx, cancelD := context.WithTimeoutCause(t.Context(), 3*time.Second, cancel.RequestDeadline)
		defer cancelD()
		s := slowLinkSink{sink: newSink(), wait: 300 * time.Millisecond}
		sp := &fakeSpeaker{perChar: time.Millisecond / 10, estPerChar: time.Millisecond / 10}
		p.Run(ctx, pipeline.Request{Audio: queue(pipeline.Frame{PCM: []int16{1}, SampleRate: 16000, Final: true}),
			Log: discard, Speaker: sp, Final: closedWith(ctx)}, s)
		require.NoError(t, s.err)
		require.NotEmpty(t, s.audio)
		require.Equal(t, s.audio[0].at, s.res.Speech.FirstAudio, "the first chunk's queueing, after its wait for the link")
	})
}
