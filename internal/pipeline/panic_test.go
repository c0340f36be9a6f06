package pipeline_test

import (
	"context"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/pipeline"
	"github.com/voiced/voiced/internal/voicedtest"
)

// panickySpeaker panics in Speak, as a Speaker whose emit (the session's
// sink) panics does once Flite raises the panic again after it returns.
type panickySpeaker struct{ fakeSpeaker }

func (*panickySpeaker) Speak(context.Context, string, func([]int16)) (pipeline.Utterance, error) {
	panic("speaker boom")
}

// closePanicSTT's recognizer panics in Close.
type closePanicSTT struct{ stages }

func (s *closePanicSTT) Start(context.Context, int) (pipeline.Recognizer, error) {
	return closePanicRec{rec{&s.stages}}, nil
}

type closePanicRec struct{ rec }

func (closePanicRec) Close() error { panic("close boom") }

// TestPanicsOffTheRequestGoroutine: a panic on a goroutine of the
// pipeline's own (the speech loop, the recognizer's Close after the
// transcript) ends in a result, not in a crashed server.
func TestPanicsOffTheRequestGoroutine(t *testing.T) {
	for _, tc := range []struct {
		name    string
		stt     pipeline.Transcriber
		speaker pipeline.Speaker
	}{
		{"speaker", &stages{}, &panickySpeaker{fakeSpeaker{estPerChar: time.Microsecond}}},
		{"recognizer close", &closePanicSTT{}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				st := &stages{}
				p, err := pipeline.New(pipeline.Config{}, pipeline.Stages{STT: tc.stt, Intent: st, Retrieval: st, LLM: st, Templates: templ{}}, nil)
				require.NoError(t, err)
				ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
				defer cancel()
				s := newSink()
				p.Run(ctx, pipeline.Request{Audio: queue(pipeline.Frame{PCM: []int16{1, 2}, SampleRate: 16000, Final: true}),
					Log: discard, Speaker: tc.speaker}, s)
				require.NoError(t, s.err)
				require.NotEmpty(t, s.res.Answer)
			})
		})
	}
}

// TestWhitespaceAnswer: a generator whose only text is whitespace gets
// the template (llm_empty), and the result's answer is still exactly the
// answer.delta events sent.
func TestWhitespaceAnswer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &stages{generate: func(_ context.Context, emit func(string)) (pipeline.Generation, error) {
			emit("\n")
			emit(" ")
			return pipeline.Generation{Provider: "fake"}, nil
		}}
		s, _ := runOne(t, st, pipeline.Config{}, time.Second)
		require.NoError(t, s.err)
		require.Contains(t, s.res.Degradation, pipeline.ReasonLLMEmpty)
		require.Equal(t, s.res.Answer, s.deltas.String(), "the answer is exactly what was streamed")
	})
}

// TestCutAnswerKeepsItsSources: an answer cut at its deadline (llm_timeout
// with text) keeps the provider, sources and degradation its generator
// announced when it started (GenerateRequest.Started): Generate's own
// return comes too late to be used, and the result said provider "" and
// no sources.
func TestCutAnswerKeepsItsSources(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := []pipeline.Passage{{ID: "tracking-your-order#1", Title: "Tracking your order"}}
		st := &stages{}
		st.generate = func(ctx context.Context, emit func(string)) (pipeline.Generation, error) {
			st.llmReq.Started(pipeline.Generation{Provider: "fake", Model: "m", Sources: src, Degradation: []string{"provider_fallback"}})
			emit("It ships ")
			<-ctx.Done()
			return pipeline.Generation{}, context.Cause(ctx)
		}
		s, _ := runOne(t, st, pipeline.Config{}, time.Second)
		require.NoError(t, s.err)
		require.Equal(t, []string{"provider_fallback", pipeline.ReasonLLMTimeout}, s.res.Degradation)
		require.Equal(t, "It ships ", s.res.Answer)
		require.Equal(t, "fake", s.res.Provider)
		require.Equal(t, src, s.res.Sources)
	})
}

// TestLLMPanicIsLogged: a generator that panics degrades the answer, and
// the panic is logged with its stack (docs/architecture.md: "logged once
// with its stack") whether or not some text had gone out: after text the
// answer is that text (stream_interrupted), and nothing else reports the
// panic.
func TestLLMPanicIsLogged(t *testing.T) {
	tests := []struct {
		name    string
		text    string // sent before the panic
		reasons []string
		answer  string
	}{
		{name: "before any text", reasons: []string{pipeline.ReasonLLMFailed}, answer: "template for order_status"},
		{name: "after some text", text: "It ships", reasons: []string{pipeline.ReasonStreamInterrupted}, answer: "It ships"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				st := &stages{generate: func(_ context.Context, emit func(string)) (pipeline.Generation, error) {
					emit(tt.text)
					panic("generator boom")
				}}
				p, err := pipeline.New(pipeline.Config{}, pipeline.Stages{STT: st, Intent: st, Retrieval: st, LLM: st, Templates: templ{}}, nil)
				require.NoError(t, err)
				var logs voicedtest.LogBuffer
				ctx, cancel := context.WithTimeout(t.Context(), time.Second)
				defer cancel()
				s := newSink()
				p.Run(ctx, pipeline.Request{Audio: queue(pipeline.Frame{PCM: []int16{1, 2}, SampleRate: 16000, Final: true}),
					Log: slog.New(slog.NewTextHandler(&logs, nil))}, s)
				require.NoError(t, s.err)
				require.Equal(t, tt.reasons, s.res.Degradation)
				require.Equal(t, tt.answer, s.res.Answer)
				require.Contains(t, logs.String(), "generator boom", "the panic is logged")
			})
		})
	}
}
