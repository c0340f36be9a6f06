package pipeline_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/cancel"
	"github.com/voiced/voiced/internal/pipeline"
)

// fakeSpeaker synthesises in fake time: perChar of synthesis per
// character, then one 100-sample chunk (10 ms at 10 kHz) per word. Its
// estimate is estPerChar per character.
type fakeSpeaker struct {
	perChar, estPerChar time.Duration

	mu     sync.Mutex
	texts  []string
	ctxErr []error // each Speak's context error when it returned
}

const fakeRate = 10000

func (f *fakeSpeaker) Engine() string  { return "fake" }
func (f *fakeSpeaker) Voice() string   { return "v" }
func (f *fakeSpeaker) SampleRate() int { return fakeRate }
func (f *fakeSpeaker) Estimate(chars int) time.Duration {
	return time.Duration(chars) * f.estPerChar
}
func (f *fakeSpeaker) MinEstimate(chars int) time.Duration { return f.Estimate(chars) }

type fakeUtterance struct {
	words []string
	sent  int
}

func (u fakeUtterance) Audio() time.Duration { return time.Duration(u.sent) * 10 * time.Millisecond }
func (u fakeUtterance) Heard(played time.Duration) int {
	heard := 0
	for i := 0; i < u.sent && time.Duration(i+1)*10*time.Millisecond <= played; i++ {
		heard += len(u.words[i]) + 1
	}
	return max(heard-1, 0)
}

func (f *fakeSpeaker) Speak(ctx context.Context, text string, emit func([]int16)) (pipeline.Utterance, error) {
	f.mu.Lock()
	f.texts = append(f.texts, text)
	f.mu.Unlock()
	u := fakeUtterance{words: strings.Fields(text)}
	err := sleepCtx(ctx, time.Duration(len(text))*f.perChar)
	for range u.words {
		if err != nil {
			break
		}
		emit(make([]int16, 100))
		u.sent++
		err = sleepCtx(ctx, time.Millisecond)
	}
	f.mu.Lock()
	f.ctxErr = append(f.ctxErr, ctx.Err())
	f.mu.Unlock()
	return u, err
}

// failing is an LLM that fails at once.
func failing(context.Context, func(string)) (pipeline.Generation, error) {
	return pipeline.Generation{}, errors.New("provider down")
}

// streamed is an LLM that writes two sentences, 100 ms apart.
func streamed(ctx context.Context, emit func(string)) (pipeline.Generation, error) {
	emit("Your order shipped yesterday. ")
	if err := sleepCtx(ctx, 100*time.Millisecond); err != nil {
		return pipeline.Generation{}, err
	}
	emit("It arrives on Friday.")
	return pipeline.Generation{Provider: "fake"}, nil
}

func runSpeech(t *testing.T, st *stages, sp pipeline.Speaker, budget, cancelAfter time.Duration, audioRoom int) *sink {
	t.Helper()
	p, err := pipeline.New(pipeline.Config{}, pipeline.Stages{STT: st, Intent: st, Retrieval: st, LLM: st, Templates: templ{}}, nil)
	require.NoError(t, err)
	ctx, cancelR := context.WithCancelCause(t.Context())
	defer cancelR(nil)
	dctx, cancelD := context.WithTimeoutCause(ctx, budget, cancel.RequestDeadline)
	defer cancelD()
	if cancelAfter > 0 {
		time.AfterFunc(cancelAfter, func() { cancelR(cancel.Cancelled) })
	}
	s := newSink()
	s.audioRoom = audioRoom
	p.Run(ctx, pipeline.Request{Audio: queue(pipeline.Frame{PCM: []int16{1}, SampleRate: 16000, Final: true}),
		Log: discard, Speaker: sp, Final: closedWith(dctx)}, s)
	return s
}

func closedWith(ctx context.Context) <-chan context.Context {
	ch := make(chan context.Context, 1)
	ch <- ctx
	return ch
}

func TestSpeech(t *testing.T) {
	tests := []struct {
		name      string
		speaker   *fakeSpeaker
		generate  func(context.Context, func(string)) (pipeline.Generation, error)
		budget    time.Duration
		reasons   []string
		spoken    int // sentences with audio
		chunks    int // chunks with samples
		beforeLLM bool
		audioRoom int
	}{
		{name: "all spoken, the first while the LLM streams", speaker: &fakeSpeaker{perChar: time.Millisecond / 10, estPerChar: time.Millisecond},
			generate: streamed, budget: 1500 * time.Millisecond, spoken: 2, chunks: 8, beforeLLM: true},
		{name: "template answer spoken", speaker: &fakeSpeaker{perChar: time.Millisecond / 10, estPerChar: time.Millisecond},
			generate: failing, budget: 210 * time.Millisecond, reasons: []string{pipeline.ReasonLLMFailed}, spoken: 1, chunks: 3},
		{name: "no time for the second sentence", speaker: &fakeSpeaker{perChar: 20 * time.Millisecond, estPerChar: 20 * time.Millisecond},
			generate: streamed, budget: 800 * time.Millisecond, reasons: []string{pipeline.ReasonSpeechTruncated}, spoken: 1, chunks: 4},
		{name: "no time for the first sentence", speaker: &fakeSpeaker{perChar: 50 * time.Millisecond, estPerChar: 50 * time.Millisecond},
			generate: streamed, budget: 800 * time.Millisecond, reasons: []string{pipeline.ReasonSpeechSkipped}},
		{name: "synthesis slower than estimated: cut by the budget", speaker: &fakeSpeaker{perChar: 15 * time.Millisecond, estPerChar: time.Millisecond},
			generate: streamed, budget: 800 * time.Millisecond, reasons: []string{pipeline.ReasonSpeechTruncated}, spoken: 1, chunks: 4},
		{name: "client not keeping up: the rest stays text", speaker: &fakeSpeaker{perChar: time.Millisecond / 10, estPerChar: time.Millisecond},
			generate: streamed, budget: 1500 * time.Millisecond, reasons: []string{pipeline.ReasonSpeechTruncated}, spoken: 1, chunks: 2, audioRoom: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				st := &stages{generate: tt.generate}
				start := time.Now()
				s := runSpeech(t, st, tt.speaker, tt.budget, 0, tt.audioRoom)
				require.NoError(t, s.err)
				require.LessOrEqual(t, s.doneAt.Sub(start), tt.budget, "never late")
				res := s.res
				require.Equal(t, tt.reasons, nilIfEmpty(res.Degradation))
				sp := res.Speech
				require.NotNil(t, sp)
				require.Equal(t, "fake", sp.Engine)
				require.Len(t, sp.Spoken, tt.spoken)
				var samples, chunks int
				for i, c := range s.audio {
					require.False(t, c.late, "audio after Done")
					require.Equal(t, fakeRate, c.rate)
					require.Equal(t, i == len(s.audio)-1, c.final, "one final, the last")
					if c.samples > 0 {
						chunks++
					}
					samples += c.samples
				}
				require.Equal(t, tt.chunks, chunks)
				if tt.generate != nil && res.Provider != "template" {
					require.Equal(t, "Your order shipped yesterday. It arrives on Friday.", res.Answer, "the text answer stays whole")
					require.NotNil(t, st.llmReq.Synthesis, "the generator sizes a spoken answer by the synthesiser's speed")
					require.Equal(t, tt.speaker.Estimate(40), st.llmReq.Synthesis(40))
				}
				if tt.chunks == 0 {
					require.Empty(t, s.audio, "skipped: no audio at all")
					require.True(t, sp.FirstAudio.IsZero())
					return
				}
				require.Equal(t, time.Duration(samples)*time.Second/fakeRate, sp.Audio)
				if tt.beforeLLM {
					require.True(t, sp.FirstAudio.Before(res.LLMStarted.Add(res.Timings[pipeline.StageLLM])),
						"the first sentence is spoken while the LLM streams")
				}
				// What a listener heard after the first sentence's 4 words
				// and one of the second's.
				if tt.spoken == 2 {
					require.Equal(t, "Your order shipped yesterday. It", res.Answer[:sp.Heard(50*time.Millisecond)])
					require.Equal(t, "Your order", res.Answer[:sp.Heard(25*time.Millisecond)])
				}
			})
		})
	}
}

// A cancelled request stops synthesis at once and sends no audio after
// its outcome.
func TestSpeechCancelled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sp := &fakeSpeaker{perChar: 5 * time.Millisecond, estPerChar: time.Millisecond}
		s := runSpeech(t, &stages{generate: streamed}, sp, 1500*time.Millisecond, 160*time.Millisecond, 0)
		require.ErrorIs(t, s.err, cancel.Cancelled)
		for _, c := range s.audio {
			require.False(t, c.late)
			require.False(t, c.final, "no final chunk for a cancelled request")
		}
		sp.mu.Lock()
		defer sp.mu.Unlock()
		require.NotEmpty(t, sp.ctxErr)
		require.Error(t, sp.ctxErr[len(sp.ctxErr)-1], "synthesis stopped by the cancellation")
	})
}
