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

// cutSpeaker emits one chunk of its sentence, then synthesises on until
// its context ends, and returns soon (1 ms) after that, as a synthesiser
// inside an uninterruptible C call does.
type cutSpeaker struct{ fakeSpeaker }

func (*cutSpeaker) Speak(ctx context.Context, text string, emit func([]int16)) (pipeline.Utterance, error) {
	emit(make([]int16, 100))
	err := sleepCtx(ctx, time.Hour)
	time.Sleep(time.Millisecond)
	return fakeUtterance{words: []string{text}, sent: 1}, err
}

// TestSpokenCountsASentenceCutMidway: the speech budget ends while the
// answer's only sentence is being spoken, after some of its audio was
// sent. The protocol counts a sentence "spoken (in full or in part)", and
// playback cuts the history by Speech.Spoken: the sentence whose audio
// the client got must be in it.
func TestSpokenCountsASentenceCutMidway(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &stages{}
		p, err := pipeline.New(pipeline.Config{}, pipeline.Stages{STT: st, Intent: st, Retrieval: st, LLM: st, Templates: templ{}}, nil)
		require.NoError(t, err)
		dctx, cancelD := context.WithTimeoutCause(t.Context(), 400*time.Millisecond, cancel.RequestDeadline)
		defer cancelD()
		s := newSink()
		p.Run(t.Context(), pipeline.Request{Audio: queue(pipeline.Frame{PCM: []int16{1}, SampleRate: 16000, Final: true}),
			Log: discard, Speaker: &cutSpeaker{fakeSpeaker{estPerChar: time.Microsecond}}, Final: closedWith(dctx)}, s)
		require.NoError(t, s.err)
		sp := s.res.Speech
		require.Equal(t, []string{pipeline.ReasonSpeechTruncated}, s.res.Degradation)
		require.Equal(t, 10*time.Millisecond, sp.Audio, "one chunk of the sentence was sent")
		require.Len(t, sp.Spoken, 1, "the sentence whose audio was sent, in part, counts as spoken")
	})
}

// refusingSink is a client that is not keeping up from the start: every
// chunk but the final one is refused.
type refusingSink struct{ *sink }

func (s refusingSink) AnswerAudio(ctx context.Context, pcm []int16, rate int, final bool) bool {
	if !final {
		return false
	}
	return s.sink.AnswerAudio(ctx, pcm, rate, final)
}

// TestNoFirstAudioWhenNoneWasSent: the protocol's speech.firstAudioMs is
// the time to the first answer.audio queued, "absent when none was". A
// client backlogged from the first chunk gets no audio (speech_skipped),
// so Speech.FirstAudio must stay zero.
func TestNoFirstAudioWhenNoneWasSent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &stages{}
		p, err := pipeline.New(pipeline.Config{}, pipeline.Stages{STT: st, Intent: st, Retrieval: st, LLM: st, Templates: templ{}}, nil)
		require.NoError(t, err)
		dctx, cancelD := context.WithTimeoutCause(t.Context(), time.Second, cancel.RequestDeadline)
		defer cancelD()
		s := newSink()
		p.Run(t.Context(), pipeline.Request{Audio: queue(pipeline.Frame{PCM: []int16{1}, SampleRate: 16000, Final: true}),
			Log: discard, Speaker: &fakeSpeaker{estPerChar: time.Microsecond}, Final: closedWith(dctx)}, refusingSink{s})
		require.NoError(t, s.err)
		require.Empty(t, s.audio, "no audio was sent")
		require.Equal(t, []string{pipeline.ReasonSpeechSkipped}, s.res.Degradation)
		require.True(t, s.res.Speech.FirstAudio.IsZero(), "no first audio: none was sent")
	})
}

// stubbornSpeaker speaks each sentence to its end whatever its context
// says, as a synthesiser inside an uninterruptible call may, and records
// the context error each sentence started with.
type stubbornSpeaker struct {
	fakeSpeaker
	started []error // guarded by fakeSpeaker.mu
}

func (f *stubbornSpeaker) Speak(ctx context.Context, text string, emit func([]int16)) (pipeline.Utterance, error) {
	f.mu.Lock()
	f.started = append(f.started, ctx.Err())
	f.mu.Unlock()
	time.Sleep(10 * time.Millisecond)
	emit(make([]int16, 100))
	return fakeUtterance{words: []string{text}, sent: 1}, nil
}

// TestNoSentenceAfterTheSpeechEnded: once the speech stage is over (the
// client stopped keeping up with the audio, or the request was
// cancelled), no further sentence goes to the synthesiser, though the one
// it was speaking ended without an error. The rest of a cancelled
// request's answer was synthesised, with a done context, after its
// outcome was reported.
func TestNoSentenceAfterTheSpeechEnded(t *testing.T) {
	threeSentences := func(_ context.Context, emit func(string)) (pipeline.Generation, error) {
		emit("Your order shipped yesterday. It arrives on Friday. Thanks for waiting.")
		return pipeline.Generation{Provider: "fake"}, nil
	}
	tests := []struct {
		name        string
		cancelAfter time.Duration // the request is cancelled (0: never)
		audioRoom   int           // chunks the client keeps up with (0: all)
		spoken      int           // sentences given to the synthesiser
	}{
		{name: "client stops keeping up in the second sentence", audioRoom: 1, spoken: 2},
		{name: "request cancelled in the first sentence", cancelAfter: 5 * time.Millisecond, spoken: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				sp := &stubbornSpeaker{fakeSpeaker: fakeSpeaker{estPerChar: time.Microsecond}}
				runSpeech(t, &stages{generate: threeSentences}, sp, time.Second, tt.cancelAfter, tt.audioRoom)
				sp.mu.Lock()
				defer sp.mu.Unlock()
				require.Len(t, sp.started, tt.spoken)
				for i, err := range sp.started {
					require.NoError(t, err, "sentence %d started after the speech ended", i)
				}
			})
		})
	}
}
