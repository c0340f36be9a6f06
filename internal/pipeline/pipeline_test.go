package pipeline_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"golang.org/x/sync/errgroup"

	"github.com/voiced/voiced/internal/cancel"
	"github.com/voiced/voiced/internal/deadline"
	"github.com/voiced/voiced/internal/pipeline"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

// stages are test doubles; each field overrides one behaviour. Latencies
// are fake time inside synctest bubbles.
type stages struct {
	partial  string
	finish   func(ctx context.Context) (string, error)
	classify func(ctx context.Context) (pipeline.Intent, error)
	retrieve func(ctx context.Context) ([]pipeline.Passage, error)
	generate func(ctx context.Context, emit func(string)) (pipeline.Generation, error)
	llmCalls int
	llmReq   pipeline.GenerateRequest // the last one
}

func (s *stages) Start(context.Context, int) (pipeline.Recognizer, error) { return rec{s}, nil }

type rec struct{ s *stages }

func (r rec) Write(context.Context, []int16) (string, error) { return r.s.partial, nil }
func (r rec) Finish(ctx context.Context) (string, error) {
	if r.s.finish != nil {
		return r.s.finish(ctx)
	}
	return "where is my order", nil
}
func (r rec) Close() error { return nil }

func (s *stages) Classify(ctx context.Context, _ string) (pipeline.Intent, error) {
	if s.classify != nil {
		return s.classify(ctx)
	}
	return pipeline.Intent{Name: "order_status", Confidence: 0.9}, nil
}

func (s *stages) Retrieve(ctx context.Context, _ string, _ int) ([]pipeline.Passage, error) {
	if s.retrieve != nil {
		return s.retrieve(ctx)
	}
	return []pipeline.Passage{{ID: "a", Title: "A", Score: 1}}, nil
}

func (s *stages) Generate(ctx context.Context, req pipeline.GenerateRequest, emit func(string)) (pipeline.Generation, error) {
	s.llmCalls++
	s.llmReq = req
	if s.generate != nil {
		return s.generate(ctx, emit)
	}
	emit("It ships ")
	emit("today.")
	return pipeline.Generation{Provider: "fake"}, nil
}

type templ struct{}

func (templ) Template(in pipeline.Intent, _ string) string { return "template for " + in.Name }

// sink records events; Done closes done.
type sink struct {
	mu     sync.Mutex
	events []string
	deltas strings.Builder
	res    *pipeline.Result
	err    error
	doneAt time.Time
	done   chan struct{}
	audio  []audioChunk // guarded by mu
	// audioRoom, when not zero, is how many chunks the client keeps up
	// with: later ones, but the final, are refused.
	audioRoom int
	// lost makes Done report the outcome undelivered, as a session's
	// does when a cancel or the deadline ended the request first.
	lost bool
}

type audioChunk struct {
	samples int
	rate    int
	final   bool
	at      time.Time
	late    bool // after Done
}

func newSink() *sink { return &sink{done: make(chan struct{})} }

func (s *sink) add(e string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.events = append(s.events, e)
}
func (s *sink) Transcript(text string, final bool) {
	if final {
		s.add("transcript:" + text)
	} else {
		s.add("partial:" + text)
	}
}
func (s *sink) Intent(in pipeline.Intent)    { s.add("intent:" + in.Name) }
func (s *sink) Retrieval([]pipeline.Passage) { s.add("retrieval") }
func (s *sink) AnswerDelta(text string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.deltas.WriteString(text)
}
func (s *sink) AnswerAudio(_ context.Context, pcm []int16, rate int, final bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !final && s.audioRoom > 0 && len(s.audio) >= s.audioRoom {
		return false
	}
	s.audio = append(s.audio, audioChunk{samples: len(pcm), rate: rate, final: final, at: time.Now(), late: !s.doneAt.IsZero()})
	return true
}
func (s *sink) Done(res *pipeline.Result, err error) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.res, s.err, s.doneAt = res, err, time.Now()
	close(s.done)
	return !s.lost
}

// runOne runs one single-frame request with the given budget inside the
// current synctest bubble and returns the sink once Run has returned.
func runOne(t *testing.T, st *stages, cfg pipeline.Config, budget time.Duration) (*sink, time.Time) {
	t.Helper()
	p, err := pipeline.New(cfg, pipeline.Stages{STT: st, Intent: st, Retrieval: st, LLM: st, Templates: templ{}}, nil)
	require.NoError(t, err)
	return runOn(t, p, budget)
}

// runOn runs one single-frame request on p.
func runOn(t *testing.T, p *pipeline.Pipeline, budget time.Duration) (*sink, time.Time) {
	t.Helper()
	dl := time.Now().Add(budget)
	ctx, cancelD := context.WithDeadlineCause(t.Context(), dl, cancel.RequestDeadline)
	defer cancelD()
	s := newSink()
	p.Run(ctx, pipeline.Request{Audio: queue(pipeline.Frame{PCM: []int16{1, 2}, SampleRate: 16000, Final: true}), Log: discard}, s)
	return s, dl
}

// queue returns a frame queue holding frames.
func queue(frames ...pipeline.Frame) *pipeline.FrameQueue {
	q := pipeline.NewFrameQueue(nil)
	for _, f := range frames {
		if err := q.Push(f); err != nil {
			panic(err)
		}
	}
	return q
}

// finalIn returns a Final channel; send delivers the request's deadline
// context, budget from now.
func finalIn(t *testing.T) (ch chan context.Context, send func(budget time.Duration)) {
	ch = make(chan context.Context, 1)
	return ch, func(budget time.Duration) {
		ctx, cancelD := context.WithTimeoutCause(t.Context(), budget, cancel.RequestDeadline)
		t.Cleanup(cancelD)
		ch <- ctx
	}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

func TestDegradation(t *testing.T) {
	errBoom := errors.New("boom")
	tests := []struct {
		name    string
		st      *stages
		budget  time.Duration
		reasons []string
		answer  string
		prov    string
	}{
		{name: "all good", st: &stages{}, budget: time.Second, answer: "It ships today.", prov: "fake"},
		{name: "stt finalisation too slow: partial used", st: &stages{partial: "where is my", finish: func(ctx context.Context) (string, error) {
			return "", sleepCtx(ctx, time.Hour)
		}}, budget: 1700 * time.Millisecond, reasons: []string{pipeline.ReasonSTTPartial}, answer: "It ships today.", prov: "fake"},
		// No words by the STT cap: an empty transcript and the templated
		// answer (for an empty transcript: say it again) while the request
		// still has time, not an error at its deadline.
		{name: "stt overruns with no partial", st: &stages{finish: func(ctx context.Context) (string, error) {
			return "", sleepCtx(ctx, time.Hour)
		}}, budget: 1700 * time.Millisecond, reasons: []string{pipeline.ReasonSTTTimeout}, answer: "template for ", prov: "template"},
		{name: "retrieval fails", st: &stages{retrieve: func(context.Context) ([]pipeline.Passage, error) {
			return nil, errBoom
		}}, budget: time.Second, reasons: []string{pipeline.ReasonRetrievalFailed}, answer: "It ships today.", prov: "fake"},
		{name: "retrieval overruns", st: &stages{retrieve: func(ctx context.Context) ([]pipeline.Passage, error) {
			return nil, sleepCtx(ctx, time.Hour)
		}}, budget: time.Second, reasons: []string{pipeline.ReasonRetrievalTimeout}, answer: "It ships today.", prov: "fake"},
		{name: "intent overruns", st: &stages{classify: func(ctx context.Context) (pipeline.Intent, error) {
			return pipeline.Intent{}, sleepCtx(ctx, time.Hour)
		}}, budget: time.Second, reasons: []string{pipeline.ReasonIntentTimeout}, answer: "It ships today.", prov: "fake"},
		{name: "llm fails before text", st: &stages{generate: func(context.Context, func(string)) (pipeline.Generation, error) {
			return pipeline.Generation{}, errBoom
		}}, budget: time.Second, reasons: []string{pipeline.ReasonLLMFailed}, answer: "template for order_status", prov: "template"},
		{name: "llm breaks mid-stream", st: &stages{generate: func(_ context.Context, emit func(string)) (pipeline.Generation, error) {
			emit("It ships")
			return pipeline.Generation{Provider: "fake"}, errBoom
		}}, budget: time.Second, reasons: []string{pipeline.ReasonStreamInterrupted}, answer: "It ships", prov: "fake"},
		{name: "llm runs out of time mid-stream", st: &stages{generate: func(ctx context.Context, emit func(string)) (pipeline.Generation, error) {
			emit("It ships")
			return pipeline.Generation{Provider: "fake"}, sleepCtx(ctx, time.Hour)
			// An abandoned generator's record never arrives: who wrote the
			// text is unknown.
		}}, budget: time.Second, reasons: []string{pipeline.ReasonLLMTimeout}, answer: "It ships", prov: ""},
		{name: "llm says nothing", st: &stages{generate: func(context.Context, func(string)) (pipeline.Generation, error) {
			return pipeline.Generation{Provider: "fake"}, nil
		}}, budget: time.Second, reasons: []string{pipeline.ReasonLLMEmpty}, answer: "template for order_status", prov: "template"},
		// Below the LLM's configured minimum (120 ms after the reserve),
		// but the stage has not been measured yet: it runs, and this one
		// answers at once.
		{name: "thin budget: an unmeasured llm still runs", st: &stages{}, budget: 200 * time.Millisecond, answer: "It ships today.", prov: "fake"},
		{name: "chain reports its own reasons", st: &stages{generate: func(_ context.Context, emit func(string)) (pipeline.Generation, error) {
			emit("From the backup.")
			return pipeline.Generation{Provider: "anthropic", Degradation: []string{"provider_fallback"}}, nil
		}}, budget: time.Second, reasons: []string{"provider_fallback"}, answer: "From the backup.", prov: "anthropic"},
		// A stream that breaks keeps what its generator announced, as one
		// cut at its deadline does (TestCutAnswerKeepsItsSources).
		{name: "llm breaks mid-stream after a fallback", st: announcing(pipeline.Generation{Provider: "fake", Degradation: []string{"provider_fallback"}},
			func(_ context.Context, emit func(string)) (pipeline.Generation, error) {
				emit("It ships")
				return pipeline.Generation{}, errBoom
			}), budget: time.Second, reasons: []string{"provider_fallback", pipeline.ReasonStreamInterrupted}, answer: "It ships", prov: "fake"},
		{name: "llm reports its own interruption", st: &stages{generate: func(_ context.Context, emit func(string)) (pipeline.Generation, error) {
			emit("It ships")
			return pipeline.Generation{Provider: "fake", Degradation: []string{pipeline.ReasonStreamInterrupted}}, errBoom
		}}, budget: time.Second, reasons: []string{pipeline.ReasonStreamInterrupted}, answer: "It ships", prov: "fake"},
		// Blocked after some text: the client has that text, so it is the
		// answer (protocol: policy_blocked "with stream_interrupted"), not
		// an error after answer.delta events.
		{name: "llm blocked after some text", st: announcing(pipeline.Generation{Provider: "fake"},
			func(_ context.Context, emit func(string)) (pipeline.Generation, error) {
				emit("It ships")
				return pipeline.Generation{}, fmt.Errorf("provider: %w", pipeline.ErrPolicyBlocked)
			}), budget: time.Second, reasons: []string{pipeline.ReasonStreamInterrupted, pipeline.ReasonPolicyBlocked}, answer: "It ships", prov: "fake"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s, dl := runOne(t, tt.st, pipeline.Config{}, tt.budget)
				require.NoError(t, s.err)
				require.Equal(t, tt.reasons, nilIfEmpty(s.res.Degradation))
				require.Equal(t, tt.answer, s.res.Answer)
				require.Equal(t, tt.answer, s.deltas.String(), "the answer is exactly what was streamed")
				require.Equal(t, tt.prov, s.res.Provider)
				require.True(t, s.doneAt.Before(dl), "outcome %v after the deadline", s.doneAt.Sub(dl))
			})
		})
	}
}

// announcing is an LLM that says what its answer comes from
// (GenerateRequest.Started) before it runs gen, as the chain does.
func announcing(from pipeline.Generation, gen func(context.Context, func(string)) (pipeline.Generation, error)) *stages {
	st := &stages{}
	st.generate = func(ctx context.Context, emit func(string)) (pipeline.Generation, error) {
		st.llmReq.Started(from)
		return gen(ctx, emit)
	}
	return st
}

func nilIfEmpty(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return s
}

func TestFailures(t *testing.T) {
	errBoom := errors.New("boom")
	tests := []struct {
		name   string
		st     *stages
		budget time.Duration
		is     error
	}{
		{"intent fails", &stages{classify: func(context.Context) (pipeline.Intent, error) {
			return pipeline.Intent{}, errBoom
		}}, time.Second, errBoom},
		{"stt fails", &stages{finish: func(context.Context) (string, error) {
			return "", pipeline.ErrBadAudio
		}}, time.Second, pipeline.ErrBadAudio},
		{"policy block", &stages{generate: func(context.Context, func(string)) (pipeline.Generation, error) {
			return pipeline.Generation{}, pipeline.ErrPolicyBlocked
		}}, time.Second, pipeline.ErrPolicyBlocked},
		{"no time even for stt", &stages{}, 50 * time.Millisecond, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s, dl := runOne(t, tt.st, pipeline.Config{}, tt.budget)
				require.Error(t, s.err)
				if tt.is != nil {
					require.ErrorIs(t, s.err, tt.is)
				}
				require.True(t, s.doneAt.Before(dl))
			})
		})
	}
}

// TestEmptyTranscript answers silence with a template, without the LLM.
func TestEmptyTranscript(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &stages{finish: func(context.Context) (string, error) { return "", nil }}
		s, _ := runOne(t, st, pipeline.Config{}, time.Second)
		require.NoError(t, s.err)
		require.Zero(t, st.llmCalls)
		require.Equal(t, "template", s.res.Provider)
	})
}

// A transcript of punctuation alone ("." or "…", what some remote
// recognisers return for silence) has no words: it is answered as
// silence, not classified (it was out_of_scope) nor sent to the LLM.
func TestPunctuationOnlyTranscriptIsSilence(t *testing.T) {
	for _, text := range []string{".", " … ", "?!", "-"} {
		synctest.Test(t, func(t *testing.T) {
			classified := false
			st := &stages{finish: func(context.Context) (string, error) { return text, nil },
				classify: func(context.Context) (pipeline.Intent, error) {
					classified = true
					return pipeline.Intent{Name: "out_of_scope", Confidence: 1}, nil
				}}
			s, _ := runOne(t, st, pipeline.Config{}, time.Second)
			require.NoError(t, s.err)
			require.False(t, classified, "%q classified", text)
			require.Zero(t, st.llmCalls, "%q", text)
			require.Equal(t, "template", s.res.Provider, "%q", text)
			require.Nil(t, s.res.Intent, "%q", text)
		})
	}
}

// TestOverrunningStageIsAbandoned: a stage that ignores its context does
// not delay the outcome, but Run waits for it before returning.
func TestOverrunningStageIsAbandoned(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		stageEnded := make(chan time.Time, 1)
		st := &stages{generate: func(ctx context.Context, emit func(string)) (pipeline.Generation, error) {
			time.Sleep(5 * time.Second) // ignores ctx entirely
			emit("too late")
			stageEnded <- time.Now()
			return pipeline.Generation{Provider: "fake"}, nil
		}}
		start := time.Now()
		s, dl := runOne(t, st, pipeline.Config{}, time.Second)
		returned := time.Now()
		require.True(t, s.doneAt.Before(dl))
		require.Equal(t, []string{pipeline.ReasonLLMTimeout}, s.res.Degradation)
		require.NotContains(t, s.deltas.String(), "too late", "late pieces are shut out")
		ended := <-stageEnded
		require.False(t, returned.Before(ended), "Run returned before its stage goroutine ended")
		require.Equal(t, 5*time.Second, ended.Sub(start).Round(time.Second))
	})
}

// TestCancelDuringStream ends the run with the cancellation cause.
func TestCancelDuringStream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, err := pipeline.New(pipeline.Config{}, pipeline.Stages{STT: &stages{}, Intent: &stages{}}, nil)
		require.NoError(t, err)
		ctx, cancelReq := context.WithCancelCause(t.Context())
		frames := queue(pipeline.Frame{PCM: []int16{1}, SampleRate: 16000})
		s := newSink()
		go func() {
			time.Sleep(100 * time.Millisecond)
			cancelReq(cancel.Cancelled)
		}()
		p.Run(ctx, pipeline.Request{Audio: frames, Log: discard}, s)
		require.ErrorIs(t, s.err, cancel.Cancelled)
	})
}

func BenchmarkRunSetup(b *testing.B) {
	st := &stages{generate: func(_ context.Context, emit func(string)) (pipeline.Generation, error) {
		emit("ok")
		return pipeline.Generation{Provider: "fake"}, nil
	}}
	p, _ := pipeline.New(pipeline.Config{}, pipeline.Stages{STT: st, Intent: st, Retrieval: st, LLM: st, Templates: templ{}}, nil)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		s := newSink()
		p.Run(ctx, pipeline.Request{Audio: queue(pipeline.Frame{Final: true, SampleRate: 16000}), Log: discard}, s)
	}
}

// slowRec is a recognizer slower than real time whose finalisation never
// ends by itself.
type slowRec struct{ n int }

func (r *slowRec) Write(ctx context.Context, _ []int16) (string, error) {
	time.Sleep(40 * time.Millisecond)
	r.n++
	return fmt.Sprintf("p%d", r.n), nil
}
func (r *slowRec) Finish(ctx context.Context) (string, error) {
	<-ctx.Done()
	return "", context.Cause(ctx)
}
func (r *slowRec) Close() error { return nil }

type slowSTT struct{}

func (slowSTT) Start(context.Context, int) (pipeline.Recognizer, error) { return &slowRec{}, nil }

// queuedFrames returns a request's frame queue holding n frames and then
// the final frame.
func queuedFrames(n int) *pipeline.FrameQueue {
	q := queue()
	for range n {
		_ = q.Push(pipeline.Frame{PCM: []int16{1, 2}, SampleRate: 16000})
	}
	_ = q.Push(pipeline.Frame{PCM: []int16{1, 2}, SampleRate: 16000, Final: true})
	return q
}

// runBehind runs, in the current synctest bubble, a request whose queued
// frames and final frame have all arrived, on a recognizer from stt that
// finalisation cannot wait for (its STT stage has 150 ms), and returns the
// sink once Run has returned.
func runBehind(t *testing.T, stt pipeline.Transcriber, queued int) *sink {
	t.Helper()
	st := &stages{}
	p, err := pipeline.New(pipeline.Config{PartialInterval: time.Millisecond, STT: deadline.Stage{Cap: 150 * time.Millisecond}},
		pipeline.Stages{STT: stt, Intent: st, Retrieval: st, LLM: st, Templates: templ{}}, nil)
	require.NoError(t, err)
	final, send := finalIn(t)
	send(1700 * time.Millisecond)
	s := newSink()
	p.Run(t.Context(), pipeline.Request{Audio: queuedFrames(queued), Final: final, Log: discard}, s)
	return s
}

// TestNoPartialAfterFinalTranscript: when finalisation falls back to the
// last partial, the recognizer still behind is stopped and no partial
// transcript follows the final one.
func TestNoPartialAfterFinalTranscript(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := runBehind(t, slowSTT{}, 20)
		require.NoError(t, s.err)
		require.Contains(t, s.res.Degradation, pipeline.ReasonSTTPartial)
		seenFinal := false
		for _, e := range s.events {
			if strings.HasPrefix(e, "transcript:") {
				seenFinal = true
			}
			if seenFinal {
				require.NotContains(t, e, "partial:", "events: %v", s.events)
			}
		}
	})
}

// TestStagePanic fails the request with an error instead of crashing.
func TestStagePanic(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &stages{classify: func(context.Context) (pipeline.Intent, error) { panic("boom") }}
		s, _ := runOne(t, st, pipeline.Config{}, time.Second)
		require.ErrorContains(t, s.err, "stage panicked: boom")
	})
}

// BenchmarkDeadlineFanOutSetup measures what a request costs to set up
// before any stage does work: its deadline and context, the intent and
// retrieval stage contexts and the errgroup fan-out, torn down again.
func BenchmarkDeadlineFanOutSetup(b *testing.B) {
	parent := context.Background()
	intentSt := deadline.Stage{Name: "intent", Cap: 250 * time.Millisecond, Min: 5 * time.Millisecond}
	retrSt := deadline.Stage{Name: "retrieval", Cap: 250 * time.Millisecond, Min: 10 * time.Millisecond}
	b.ReportAllocs()
	for b.Loop() {
		now := time.Now()
		dl := deadline.Request(now.Add(time.Second), now, 1700*time.Millisecond)
		dctx, cancelD := context.WithDeadlineCause(parent, dl, cancel.RequestDeadline)
		g, gctx := errgroup.WithContext(dctx)
		for _, st := range []deadline.Stage{intentSt, retrSt} {
			g.Go(func() error {
				sctx, stop, err := st.Start(gctx, 100*time.Millisecond)
				if err != nil {
					return err
				}
				stop()
				_ = sctx
				return nil
			})
		}
		if err := g.Wait(); err != nil {
			b.Fatal(err)
		}
		cancelD()
	}
}

// hurryRec records, for each Write, whether Hurry had been called by then.
type hurryRec struct {
	mu      sync.Mutex
	hurried bool
	writes  []bool
}

func (r *hurryRec) Write(context.Context, []int16) (string, error) {
	time.Sleep(40 * time.Millisecond) // behind real time
	r.mu.Lock()
	defer r.mu.Unlock()
	r.writes = append(r.writes, r.hurried)
	return "", nil
}
func (r *hurryRec) Finish(context.Context) (string, error) { return "where is my order", nil }
func (r *hurryRec) Close() error                           { return nil }
func (r *hurryRec) Hurry() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.hurried = true
}

type hurrySTT struct{ rec *hurryRec }

func (s hurrySTT) Start(context.Context, int) (pipeline.Recognizer, error) { return s.rec, nil }

// TestHurry: a recognizer behind real time is told the final frame has
// arrived as soon as it does, not once it has caught up with it, so that
// it can put the audio still queued ahead of other streams.
func TestHurry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &stages{}
		rec := &hurryRec{}
		p, err := pipeline.New(pipeline.Config{}, pipeline.Stages{STT: hurrySTT{rec}, Intent: st, Retrieval: st, LLM: st, Templates: templ{}}, nil)
		require.NoError(t, err)
		final, send := finalIn(t)
		go func() {
			// The final frame arrives while the first of the queued
			// frames is being written (each takes 40 ms).
			time.Sleep(60 * time.Millisecond)
			send(1700 * time.Millisecond)
		}()
		s := newSink()
		p.Run(t.Context(), pipeline.Request{Audio: queuedFrames(5), Final: final, Log: discard}, s)
		require.NoError(t, s.err)
		require.Equal(t, []bool{false, true, true, true, true, true}, rec.writes,
			"Hurry must come with the final frame's arrival, not after the queue is written")
	})
}

// busyRec is a recognizer that reports a degraded transcript.
type busyRec struct{ rec }

func (busyRec) Degradation() string { return pipeline.ReasonSTTBusy }

type busySTT struct{ *stages }

func (s busySTT) Start(context.Context, int) (pipeline.Recognizer, error) {
	return busyRec{rec{s.stages}}, nil
}

// TestRecognizerDegradation: a recognizer's own degradation (a busy
// engine's cheaper search) reaches the result, and the answer is given.
func TestRecognizerDegradation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &stages{}
		p, err := pipeline.New(pipeline.Config{}, pipeline.Stages{STT: busySTT{st}, Intent: st, Retrieval: st, LLM: st, Templates: templ{}}, nil)
		require.NoError(t, err)
		ctx, cancelD := context.WithTimeout(t.Context(), time.Second)
		defer cancelD()
		s := newSink()
		p.Run(ctx, pipeline.Request{Audio: queue(pipeline.Frame{PCM: []int16{1, 2}, SampleRate: 16000, Final: true}), Log: discard}, s)
		require.NoError(t, s.err)
		require.Equal(t, []string{pipeline.ReasonSTTBusy}, s.res.Degradation)
		require.Equal(t, "It ships today.", s.deltas.String())
	})
}

// busySlowRec is a slow recognizer on a busy engine.
type busySlowRec struct{ *slowRec }

func (busySlowRec) Degradation() string { return pipeline.ReasonSTTBusy }

type busySlowSTT struct{}

func (busySlowSTT) Start(context.Context, int) (pipeline.Recognizer, error) {
	return busySlowRec{&slowRec{}}, nil
}

// When finalisation runs out of time and the last partial stands in, the
// partial came from the same degraded recognition: both reasons are given.
func TestRecognizerDegradationWithPartial(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := runBehind(t, busySlowSTT{}, 3)
		require.NoError(t, s.err)
		require.Equal(t, []string{pipeline.ReasonSTTBusy, pipeline.ReasonSTTPartial}, s.res.Degradation)
	})
}

// TestLearnedMinimums checks that a stage's minimum follows its measured
// cost: a cheap LLM runs with far less time left than its configured
// minimum, a slow one is skipped once it has shown how slow it is.
func TestLearnedMinimums(t *testing.T) {
	tests := []struct {
		name    string
		llm     time.Duration // how long the LLM takes
		reasons []string      // of a request with 200 ms after the 16 measured ones
	}{
		{name: "cheap: runs", llm: time.Millisecond},
		{name: "slow: skipped", llm: 300 * time.Millisecond, reasons: []string{pipeline.ReasonLLMSkipped}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				st := &stages{generate: func(ctx context.Context, emit func(string)) (pipeline.Generation, error) {
					if err := sleepCtx(ctx, tt.llm); err != nil {
						return pipeline.Generation{}, err
					}
					emit("It ships today.")
					return pipeline.Generation{Provider: "fake"}, nil
				}}
				p, err := pipeline.New(pipeline.Config{}, pipeline.Stages{STT: st, Intent: st, Retrieval: st, LLM: st, Templates: templ{}}, nil)
				require.NoError(t, err)
				for range 16 {
					s, _ := runOn(t, p, time.Second)
					require.Empty(t, s.res.Degradation)
				}
				s, dl := runOn(t, p, 200*time.Millisecond)
				require.Equal(t, tt.reasons, nilIfEmpty(s.res.Degradation))
				require.True(t, s.doneAt.Before(dl))
			})
		})
	}
}

// captureLLM records the request the answer generator gets.
type captureLLM struct{ got pipeline.GenerateRequest }

func (c *captureLLM) Generate(_ context.Context, req pipeline.GenerateRequest, emit func(string)) (pipeline.Generation, error) {
	c.got = req
	emit("It ships today.")
	return pipeline.Generation{Provider: "fake"}, nil
}

// TestGenerateRequestCarriesTheConversation: the request's history and
// conversation id reach the answer generator (the LLM chain's cost caps
// count per conversation).
func TestGenerateRequestCarriesTheConversation(t *testing.T) {
	st := &stages{partial: "where", finish: func(context.Context) (string, error) { return "where is my order", nil }}
	llm := &captureLLM{}
	p, err := pipeline.New(pipeline.Config{}, pipeline.Stages{STT: st, Intent: st, Retrieval: st, LLM: llm, Templates: templ{}}, nil)
	require.NoError(t, err)
	ctx, cancelD := context.WithTimeoutCause(t.Context(), 2*time.Second, cancel.RequestDeadline)
	defer cancelD()
	s := newSink()
	history := []pipeline.Turn{{User: "hi", Assistant: "Hello."}}
	p.Run(ctx, pipeline.Request{Audio: queue(pipeline.Frame{PCM: []int16{1, 2}, SampleRate: 16000, Final: true}),
		History: func() []pipeline.Turn { return history }, ConversationID: "conv-42", Log: discard}, s)
	require.NoError(t, s.err)
	require.Equal(t, "conv-42", llm.got.ConversationID)
	require.Equal(t, history, llm.got.History)
	require.Equal(t, "where is my order", llm.got.Transcript)
}

// summingSTT's recognizers add up the samples they are written, as a real
// one copies them, into sum.
type summingSTT struct{ sum *atomic.Int64 }

func (s summingSTT) Start(context.Context, int) (pipeline.Recognizer, error) {
	return summingRec(s), nil
}

type summingRec summingSTT

func (r summingRec) Write(_ context.Context, pcm []int16) (string, error) {
	for _, v := range pcm {
		r.sum.Add(int64(v))
	}
	return "", nil
}
func (summingRec) Finish(context.Context) (string, error) { return "where is my order", nil }
func (summingRec) Close() error                           { return nil }

// TestPooledFrames: frames whose buffers come from PooledFrame reach the
// recognizer intact while later frames, pushed as the recognizer works,
// reuse the buffers of frames already written (a buffer reused before its
// frame was written would change the sum), and a frame too large for the
// pool is allocated.
func TestPooledFrames(t *testing.T) {
	const frames, size = 300, 320
	var sum atomic.Int64
	st := &stages{}
	p, err := pipeline.New(pipeline.Config{}, pipeline.Stages{STT: summingSTT{&sum}, Intent: st, Retrieval: st, LLM: st, Templates: templ{}}, nil)
	require.NoError(t, err)
	q := pipeline.NewFrameQueue(nil)
	var want int64
	var pusher sync.WaitGroup
	pusher.Go(func() {
		for i := range frames {
			fr := pipeline.PooledFrame(size)
			for range size {
				fr.PCM = append(fr.PCM, int16(i))
			}
			want += int64(i * size)
			fr.SampleRate, fr.Final = 16000, i == frames-1
			if err := q.Push(fr); err != nil {
				t.Errorf("push frame %d: %v", i, err)
				return
			}
		}
	})
	ctx, cancelD := context.WithTimeoutCause(t.Context(), 10*time.Second, cancel.RequestDeadline)
	defer cancelD()
	s := newSink()
	p.Run(ctx, pipeline.Request{Audio: q, Log: discard}, s)
	pusher.Wait()
	require.NoError(t, s.err)
	require.Equal(t, want, sum.Load(), "the samples as pushed")

	big := pipeline.PooledFrame(100000)
	require.GreaterOrEqual(t, cap(big.PCM), 100000)
}

// altRec is a recognizer with an N-best list.
type altRec struct {
	rec
	alts []pipeline.Hypothesis
}

func (r altRec) Alternatives() []pipeline.Hypothesis { return r.alts }

type altSTT struct {
	*stages
	alts []pipeline.Hypothesis
}

func (s altSTT) Start(context.Context, int) (pipeline.Recognizer, error) {
	return altRec{rec{s.stages}, s.alts}, nil
}

// altClassifier records how it was asked.
type altClassifier struct {
	*stages
	mu   sync.Mutex
	got  []pipeline.Hypothesis
	text int // Classify calls
}

func (c *altClassifier) Classify(ctx context.Context, text string) (pipeline.Intent, error) {
	c.mu.Lock()
	c.text++
	c.mu.Unlock()
	return c.stages.Classify(ctx, text)
}

func (c *altClassifier) ClassifyAlternatives(_ context.Context, alts []pipeline.Hypothesis) (pipeline.Intent, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.got = alts
	return pipeline.Intent{Name: "cancel_order", Confidence: 0.8}, nil
}

// TestAlternatives: the recognizer's N-best list reaches a classifier that
// weighs it; the transcript the caller sees and the answer's stay the
// first hypothesis; without a usable list the classifier gets the text.
func TestAlternatives(t *testing.T) {
	h := func(text string, score float64) pipeline.Hypothesis {
		return pipeline.Hypothesis{Text: text, Score: score}
	}
	nbest := []pipeline.Hypothesis{h("where is my order", -1), h("where is my odor", -1.2)}
	for _, tc := range []struct {
		name       string
		alts       []pipeline.Hypothesis
		want       []pipeline.Hypothesis // what ClassifyAlternatives got; nil: Classify was called
		wantIntent string
	}{
		{"n-best", nbest, nbest, "cancel_order"},
		{"one hypothesis", nbest[:1], nil, "order_status"},
		{"none", nil, nil, "order_status"},
		// A list that is not of this transcript is not used.
		{"another transcript", []pipeline.Hypothesis{h("cancel it", -1), h("cancel", -2)}, nil, "order_status"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				st := &stages{}
				clf := &altClassifier{stages: st}
				p, err := pipeline.New(pipeline.Config{}, pipeline.Stages{STT: altSTT{st, tc.alts}, Intent: clf, Retrieval: st, LLM: st, Templates: templ{}}, nil)
				require.NoError(t, err)
				s, _ := runOn(t, p, time.Second)
				require.NoError(t, s.err)
				require.Equal(t, "where is my order", s.res.Transcript)
				require.Equal(t, "where is my order", st.llmReq.Transcript)
				require.Equal(t, tc.wantIntent, s.res.Intent.Name)
				require.Equal(t, tc.want, clf.got)
				if tc.want == nil {
					require.Equal(t, 1, clf.text)
				} else {
					require.Equal(t, 0, clf.text)
				}
			})
		})
	}
}
