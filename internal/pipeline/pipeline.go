package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/voiced/voiced/internal/cancel"
	"github.com/voiced/voiced/internal/deadline"
)

// Stage names, used in timings, logs and metric labels.
const (
	StageSTT       = "stt"
	StageIntent    = "intent"
	StageRetrieval = "retrieval"
	StageLLM       = "llm"
)

// Degradation reasons reported in results. Generators may add their own.
const (
	ReasonSTTPartial        = "stt_partial"        // STT finalisation ran out of time; the last partial was used
	ReasonSTTBusy           = "stt_busy"           // a busy recognizer used its cheaper search (see Degrader)
	ReasonSTTTimeout        = "stt_timeout"        // STT ran out of its budget before any words; templated answer
	ReasonIntentSkipped     = "intent_skipped"     // too little time left to classify
	ReasonIntentTimeout     = "intent_timeout"     // the classifier ran out of its budget
	ReasonRetrievalSkipped  = "retrieval_skipped"  // too little time left to retrieve
	ReasonRetrievalTimeout  = "retrieval_timeout"  // retrieval ran out of its budget
	ReasonRetrievalFailed   = "retrieval_failed"   // retrieval returned an error
	ReasonLLMSkipped        = "llm_skipped"        // too little time left to start the LLM; templated answer
	ReasonLLMTimeout        = "llm_timeout"        // the LLM ran out of its budget
	ReasonLLMFailed         = "llm_failed"         // the LLM failed before any text; templated answer
	ReasonLLMEmpty          = "llm_empty"          // the LLM returned no text; templated answer
	ReasonStreamInterrupted = "stream_interrupted" // the answer stream broke after some text was sent
	ReasonPolicyBlocked     = "policy_blocked"     // with stream_interrupted: the answer was blocked after some text was sent
)

// Config sets the budgets of the pipeline. The zero value means the
// defaults documented on each field.
type Config struct {
	// Reserve is kept back from every stage for sending the final answer.
	// Default 100 ms.
	Reserve time.Duration
	// Per-stage caps and minimums. Defaults: STT cap 1.2 s, min 30 ms;
	// intent cap 250 ms, min 5 ms; retrieval cap 250 ms, min 10 ms; LLM cap
	// 700 ms, min 120 ms; TTS (speech, which starts with the LLM and runs
	// alongside it) cap 1.5 s, min 30 ms. The intent, retrieval and LLM
	// minimums are ceilings: each is lowered to the stage's measured cost
	// (the p99 of its last 128 runs within a minute, 1 ms before 16 runs or
	// with none that recent), so a cheap embedded stage runs whenever
	// there is time for it.
	STT, Intent, Retrieval, LLM, TTS deadline.Stage
	// TopK is how many passages retrieval returns. Default 3.
	TopK int
	// PartialInterval is the least time between two partial transcripts
	// sent to the client. Default 250 ms.
	PartialInterval time.Duration
}

// WithDefaults returns c with each zero field set to its documented
// default.
func (c Config) WithDefaults() Config {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	stage := func(s *deadline.Stage, name string, capv, minv time.Duration) {
		s.Name = name
		def(&s.Cap, capv)
		def(&s.Min, minv)
	}
	def(&c.Reserve, 100*time.Millisecond)
	def(&c.PartialInterval, 250*time.Millisecond)
	stage(&c.STT, StageSTT, 1200*time.Millisecond, 30*time.Millisecond)
	stage(&c.Intent, StageIntent, 250*time.Millisecond, 5*time.Millisecond)
	stage(&c.Retrieval, StageRetrieval, 250*time.Millisecond, 10*time.Millisecond)
	stage(&c.LLM, StageLLM, 700*time.Millisecond, 120*time.Millisecond)
	stage(&c.TTS, StageTTS, 1500*time.Millisecond, 30*time.Millisecond)
	if c.TopK == 0 {
		c.TopK = 3
	}
	return c
}

// Stages are the engines a pipeline runs. STT and Intent are required;
// a nil Retrieval is never run; a nil LLM always gives templated answers;
// a nil Templates uses built-in generic sentences.
type Stages struct {
	STT       Transcriber
	Intent    Classifier
	Retrieval Retriever
	LLM       Generator
	Templates Templater
}

// Pipeline runs utterances through the stages. It is safe for concurrent
// use; each Run is independent.
type Pipeline struct {
	cfg     Config
	st      Stages
	metrics *Metrics
	// costs are what the intent, retrieval and LLM stages are measured to
	// cost; each lowers its stage's minimum (deadline.Stage.Learned).
	intentCost, retrievalCost, llmCost deadline.Cost
}

// New returns a pipeline. metrics may be nil.
func New(cfg Config, st Stages, metrics *Metrics) (*Pipeline, error) {
	if st.STT == nil || st.Intent == nil {
		return nil, errors.New("pipeline: STT and intent stages are required")
	}
	if st.Templates == nil {
		st.Templates = genericTemplates{}
	}
	return &Pipeline{cfg: cfg.WithDefaults(), st: st, metrics: metrics}, nil
}

// Config returns the pipeline's configuration with defaults applied.
func (p *Pipeline) Config() Config { return p.cfg }

// Frame is one audio frame of a request, already validated by the
// session.
type Frame struct {
	PCM        []int16
	SampleRate int
	Final      bool
	// pooled is the buffer from PooledFrame under PCM, which goes back to
	// the pool once the recognizer has copied the samples (a Recognizer
	// does not keep what Write is given).
	pooled *[]int16
}

// maxPooledSamples is the largest frame whose buffer is reused: 20 ms at
// 48 kHz and 40 ms at 24 kHz fit; a larger frame is rare and allocated.
const maxPooledSamples = 1024

// pcmBuffers are frames' sample buffers. A frame's samples were 44% of
// the bytes the server allocated at 500 real-time sessions, and the
// garbage collector's work follows those bytes.
var pcmBuffers = sync.Pool{New: func() any { b := make([]int16, 0, maxPooledSamples); return &b }}

// PooledFrame returns a frame whose PCM, empty, has room for n samples,
// in a buffer that is reused once the recognizer has the frame; for n over
// maxPooledSamples, a new one. Append the samples to PCM.
func PooledFrame(n int) Frame {
	if n > maxPooledSamples {
		return Frame{PCM: make([]int16, 0, n)}
	}
	p := pcmBuffers.Get().(*[]int16)
	return Frame{PCM: (*p)[:0], pooled: p}
}

// recycle returns f's buffer to the pool; f must not be used after.
func (f *Frame) recycle() {
	if f.pooled != nil {
		pcmBuffers.Put(f.pooled)
		f.pooled, f.PCM = nil, nil
	}
}

// Sink receives a request's events. Its methods must not block: they are
// called from the pipeline's goroutines while stages run.
type Sink interface {
	Transcript(text string, final bool)
	Intent(Intent)
	Retrieval([]Passage)
	AnswerDelta(text string)
	// AnswerAudio delivers a chunk of the spoken answer (requests with a
	// Speaker only): PCM at sampleRate, in order; the last call, and only
	// it, has final set (and may carry no samples). Every call comes
	// before Done. It may wait, within ctx (the speech stage's), for the
	// client to take the audio, and reports false when the client is not
	// keeping up with it: the chunk was dropped, and speech stops there.
	AnswerAudio(ctx context.Context, pcm []int16, sampleRate int, final bool) bool
	// Done delivers the request's outcome. Run calls it exactly once,
	// as soon as the outcome is known, before the deadline. It reports
	// whether the outcome became the request's end: false when something
	// else ended it first (a cancel, the deadline's own terminal).
	Done(res *Result, err error) bool
}

// Result is the outcome of a request that produced an answer.
type Result struct {
	Transcript  string
	Intent      *Intent // nil when the intent is unknown
	Passages    []Passage
	Answer      string
	Degradation []string
	Provider    string
	Model       string
	// Sources are the passages the answer was built from, in the order
	// used (Generation.Sources); none for a templated answer.
	Sources []Passage
	// Timings holds the duration of each stage that ran, by stage name.
	// The STT time is its finalisation: from the final frame's arrival to
	// the final transcript.
	Timings map[string]time.Duration
	// LLMStarted is when the LLM stage started; zero when it did not.
	LLMStarted time.Time
	// Reserve is the time kept back for sending the answer, and Minimums
	// the least budget each stage needed to start, as the request found
	// them (see Config).
	Reserve  time.Duration
	Minimums map[string]time.Duration
	// Speech is what was spoken of the answer; nil without a Speaker.
	Speech *Speech
}

// Degraded reports whether the answer is degraded.
func (r *Result) Degraded() bool { return len(r.Degradation) > 0 }

// Request is one utterance to run.
type Request struct {
	// Audio delivers the utterance's audio as it arrives, up to and
	// including the frame marked Final. Run closes it when it returns.
	Audio *FrameQueue
	// Final delivers, as soon as the final frame arrives, the context
	// that carries the request's deadline: the one deadline of the
	// request, decided by the caller and derived from Run's context.
	// Finalising the transcript and every stage after it run under it,
	// however much audio is still queued ahead of the final frame. When
	// Final is nil, Run's own context carries the deadline and the final
	// frame counts as arrived when the recognizer reaches it.
	Final <-chan context.Context
	// History returns the session's earlier exchanges, oldest first, for
	// the answer generator (nil: none). It is called when the generator
	// starts, not when the request opens: an exchange answered while this
	// request streamed, or cut since by what the client played, is as the
	// client last had it.
	History func() []Turn
	// ConversationID is the conversation the request belongs to, passed
	// to the answer generator (GenerateRequest.ConversationID). The
	// session sets its own id until conversations outlive sessions.
	ConversationID string
	// Tenant is the client the request is answered for, passed to the
	// answer generator (GenerateRequest.Tenant); empty: none.
	Tenant string
	// Log is the request's logger.
	Log *slog.Logger
	// Speaker, when not nil, speaks the answer (see Sink.AnswerAudio).
	Speaker Speaker
}

// Minimums returns the least budget each stage needs to start now, by
// stage name: the configured minimums, those of intent, retrieval and the
// LLM lowered to their measured cost.
func (p *Pipeline) Minimums() map[string]time.Duration {
	c := &p.cfg
	return map[string]time.Duration{
		StageSTT:       c.STT.Min,
		StageIntent:    c.Intent.Learned(&p.intentCost).Min,
		StageRetrieval: c.Retrieval.Learned(&p.retrievalCost).Min,
		StageLLM:       c.LLM.Learned(&p.llmCost).Min,
		StageTTS:       c.TTS.Min,
	}
}

// Run streams the request's frames into the pipeline until the final
// frame, then runs the remaining stages under the request's deadline and
// reports the outcome to sink.Done. It returns only after every goroutine
// it started has ended; a stage that ignores its context delays that
// return, never the outcome.
func (p *Pipeline) Run(ctx context.Context, req Request, sink Sink) {
	r := &run{p: p, log: req.Log, sink: sink, history: req.History, conversation: req.ConversationID, tenant: req.Tenant, speaker: req.Speaker,
		timings: make(map[string]time.Duration, 5)}
	defer req.Audio.Close()
	defer r.wg.Wait()
	res, err := r.run(ctx, req.Audio, req.Final)
	// Degraded answers: a request that ends in an error gave none, and
	// one whose result lost to a cancel or its deadline was never sent.
	if sink.Done(res, err) && err == nil {
		for _, why := range res.Degradation {
			p.metrics.degraded(why)
		}
	}
}

// run is the state of one Run.
type run struct {
	p       *Pipeline
	log     *slog.Logger
	sink    Sink
	history func() []Turn // Request.History
	speaker Speaker
	wg      sync.WaitGroup // every goroutine the run starts
	degr    []string

	conversation string // Request.ConversationID
	tenant       string // Request.Tenant

	mu      sync.Mutex               // intent and retrieval record in parallel
	timings map[string]time.Duration // guarded by mu
}

func (r *run) timed(stage, outcome string, d time.Duration) {
	r.mu.Lock()
	r.timings[stage] = d
	r.mu.Unlock()
	r.p.metrics.stage(stage, outcome, d)
}

// degrade adds reason to the result's degradation, once: a generator may
// already have reported the reason the pipeline gives for how it ended.
func (r *run) degrade(reason string) {
	if !slices.Contains(r.degr, reason) {
		r.degr = append(r.degr, reason)
	}
}

func (r *run) run(ctx context.Context, audio *FrameQueue, finalIn <-chan context.Context) (*Result, error) {
	cfg := &r.p.cfg

	// Phase 1: feed audio to the recognizer as it arrives.
	streamCtx, stopStream := context.WithCancelCause(ctx)
	defer stopStream(nil)
	f := &feeder{
		stt:      r.p.st.STT,
		sink:     r.sink,
		interval: cfg.PartialInterval,
		log:      r.log,
		final:    make(chan struct{}),
		finish:   make(chan context.Context, 1),
		out:      make(chan sttOutcome, 1),
	}
	r.wg.Go(func() { f.loop(streamCtx, audio) })

	// Phase 2: the final frame is in; from here dctx carries the one
	// deadline of the request.
	reached := f.final // the recognizer reached the final frame
	if finalIn != nil {
		reached = nil // the caller says when the final frame arrives
	}
	var dctx context.Context
	select {
	case dctx = <-finalIn:
	case <-reached:
		dctx = ctx
	case o := <-f.out:
		return nil, o.err
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
	finalAt := time.Now()
	// Audio still queued behind the final frame is now what the caller
	// waits for.
	f.hurry()
	res := &Result{Timings: r.timings, Reserve: cfg.Reserve, Minimums: r.p.Minimums()}
	defer func() { res.Degradation = r.degr }()

	text, alts, err := r.finishSTT(dctx, f, finalAt)
	// The transcript is settled either way: no partial may follow it, and
	// a recognizer still working through queued audio is stopped.
	f.close()
	stopStream(errSTTDone)
	if err != nil {
		return nil, err
	}
	res.Transcript = text
	r.sink.Transcript(text, true)

	// Phase 3: intent (required) and retrieval (optional) in parallel;
	// nothing to understand in no words (silence, or stt_timeout), which
	// the template answers.
	if !NoWords(text) {
		in, passages, err := r.understand(dctx, text, alts)
		if err != nil {
			return nil, err
		}
		res.Intent, res.Passages = in, passages
	}

	// Phase 4: the answer.
	if err := r.answer(ctx, dctx, res); err != nil {
		return nil, err
	}
	return res, nil
}

// errSTTDone stops a feeder once the transcript is settled.
var errSTTDone = errors.New("stt: transcript settled")

// finishSTT finalises the recognition under the STT stage budget. If
// finalisation cannot finish in time but a partial transcript exists, the
// partial is used and the result degraded; without one, the transcript is
// empty (ReasonSTTTimeout), so that the caller is asked to say it again
// while the request still has time, rather than told nothing until an
// error.
func (r *run) finishSTT(dctx context.Context, f *feeder, arrival time.Time) (string, []Hypothesis, error) {
	cfg := &r.p.cfg
	sctx, cancelS, err := cfg.STT.Start(dctx, cfg.Reserve)
	if err != nil {
		r.p.metrics.stage(StageSTT, outcomeOf(err), 0)
		return "", nil, err
	}
	defer cancelS()
	f.finish <- sctx
	select {
	case o := <-f.out:
		if o.err == nil || dctx.Err() != nil || !expired(sctx) {
			r.timed(StageSTT, outcomeOf(o.err), time.Since(arrival))
			if why := f.degradation(); o.err == nil && why != "" {
				r.degrade(why)
			}
			return o.text, o.alts, o.err
		}
		// It gave up as its budget ran out (expired): as below.
	case <-sctx.Done():
	}
	err = context.Cause(sctx)
	if err == nil {
		err = context.DeadlineExceeded // due, its timer not yet run
	}
	r.timed(StageSTT, outcomeOf(err), time.Since(arrival))
	if dctx.Err() == nil {
		if p := f.lastPartial(); p != "" {
			// The partial came from the same recognition.
			if why := f.degradation(); why != "" {
				r.degrade(why)
			}
			r.degrade(ReasonSTTPartial)
			return p, nil, nil
		}
		r.degrade(ReasonSTTTimeout)
		return "", nil, nil
	}
	return "", nil, err
}

// understand runs intent and retrieval in parallel. A failed intent fails
// the request; running out of time for it only degrades the answer. alts
// are the recognizer's alternatives to text, if it gave any: a classifier
// that can weigh them (AlternativesClassifier) gets them instead of text.
// Retrieval and the answer use text, the transcript the caller sees.
func (r *run) understand(dctx context.Context, text string, alts []Hypothesis) (*Intent, []Passage, error) {
	cfg := &r.p.cfg
	var (
		in         *Intent
		passages   []Passage
		intentWhy  string
		retrievWhy string
	)
	g, gctx := errgroup.WithContext(dctx)
	g.Go(func() error {
		v, why, err := runStage(gctx, r, cfg.Intent, &r.p.intentCost, func(ctx context.Context) (Intent, error) {
			if ac, ok := r.p.st.Intent.(AlternativesClassifier); ok && len(alts) > 1 && alts[0].Text == text {
				return ac.ClassifyAlternatives(ctx, alts)
			}
			return r.p.st.Intent.Classify(ctx, text)
		})
		if err != nil {
			return err
		}
		if why != "" {
			intentWhy = why
			return nil
		}
		in = &v
		r.sink.Intent(v)
		return nil
	})
	if r.p.st.Retrieval != nil {
		g.Go(func() error {
			v, why, err := runStage(gctx, r, cfg.Retrieval, &r.p.retrievalCost, func(ctx context.Context) ([]Passage, error) {
				return r.p.st.Retrieval.Retrieve(ctx, text, cfg.TopK)
			})
			switch {
			case err != nil:
				// Retrieval is optional: a failure degrades the answer.
				// Cut short by the group (the intent failed, whose error
				// is then the cause) or by the request's end, it did not
				// fail: the error is not its own.
				if gctx.Err() == nil {
					r.log.Warn("retrieval failed", "err", err)
				}
				retrievWhy = ReasonRetrievalFailed
			case why != "":
				retrievWhy = why
			default:
				passages = v
				r.sink.Retrieval(v)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		if dctx.Err() != nil {
			return nil, nil, context.Cause(dctx)
		}
		return nil, nil, err
	}
	if dctx.Err() != nil {
		return nil, nil, context.Cause(dctx)
	}
	// Record reasons in a stable order: intent first.
	for _, why := range []string{intentWhy, retrievWhy} {
		if why != "" {
			r.degrade(why)
		}
	}
	return in, passages, nil
}

// runStage runs fn under the stage's budget. A stage that cannot start for
// lack of time, or that runs out of its own budget, returns a degradation
// reason rather than an error; the request's own end (deadline or
// cancellation) and genuine failures return an error.
func runStage[T any](ctx context.Context, r *run, st deadline.Stage, cost *deadline.Cost, fn func(context.Context) (T, error)) (T, string, error) {
	var zero T
	sctx, cancelS, err := st.Learned(cost).Start(ctx, r.p.cfg.Reserve)
	if err != nil {
		if _, ok := errors.AsType[*deadline.BudgetError](err); ok {
			r.p.metrics.stage(st.Name, "skipped", 0)
			return zero, st.Name + "_skipped", nil
		}
		return zero, "", err
	}
	defer cancelS()
	start := time.Now()
	v, err := await(sctx, &r.wg, func() (T, error) { return fn(sctx) })
	d := time.Since(start)
	// The stage's own budget ran out while the request lives on.
	timedOut := err != nil && ctx.Err() == nil && expired(sctx)
	outcome := outcomeOf(err)
	switch {
	case err != nil && ctx.Err() != nil && outcome == "error":
		// Cut short by its group, whose cause (a sibling's failure) is
		// err: cancelled, not failed.
		outcome = "cancelled"
	case timedOut:
		outcome = "timeout" // whatever error the stage gave up with
	}
	r.timed(st.Name, outcome, d)
	observeCost(ctx, cost, d)
	if timedOut {
		return zero, st.Name + "_timeout", nil
	}
	return v, "", err
}

// expired reports whether ctx's deadline has come: its timer has fired,
// or it is due and the timer has not run yet. A stage that keeps its own
// time by the deadline (an engine's client timeout set from it) may give
// up with an error of its own in that instant, before the timer ends ctx:
// it ran out of its budget, it did not fail.
func expired(ctx context.Context) bool {
	if ctx.Err() != nil {
		return true
	}
	d, ok := ctx.Deadline()
	return ok && !d.After(time.Now())
}

// observeCost teaches cost a run of its stage that took d, unless the
// request ended meanwhile (a cancelled run says nothing of the cost). A
// run cut short by its own budget is observed with that budget.
func observeCost(ctx context.Context, cost *deadline.Cost, d time.Duration) {
	if ctx.Err() == nil {
		cost.Observe(d)
	}
}

// await runs fn in a goroutine tracked by wg and returns its result, or
// ctx's cause as soon as ctx is done. A result that arrives after ctx is
// done is discarded: late answers are never used.
func await[T any](ctx context.Context, wg *sync.WaitGroup, fn func() (T, error)) (T, error) {
	type result struct {
		v   T
		err error
	}
	ch := make(chan result, 1)
	wg.Go(func() {
		defer func() {
			// A stage that panics fails its request, not the server.
			if p := recover(); p != nil {
				ch <- result{err: fmt.Errorf("stage panicked: %v\n%s", p, debug.Stack())}
			}
		}()
		v, err := fn()
		ch <- result{v, err}
	})
	var zero T
	select {
	case res := <-ch:
		if ctx.Err() != nil {
			return zero, context.Cause(ctx)
		}
		return res.v, res.err
	case <-ctx.Done():
		return zero, context.Cause(ctx)
	}
}

// answer writes the answer and, with a Speaker, speaks it while it
// streams; the audio is all handed to the sink before answer returns.
func (r *run) answer(ctx, dctx context.Context, res *Result) error {
	sp := r.startSpeech(dctx)
	if sp != nil {
		defer sp.stop()
	}
	if err := r.answerText(ctx, dctx, res, sp); err != nil {
		return err
	}
	if sp != nil {
		res.Speech = sp.finish(ctx)
		if ctx.Err() != nil {
			return context.Cause(ctx) // cancelled while speaking
		}
	}
	return nil
}

// answerText runs the LLM under its budget and fills in the answer, falling
// back to the intent's template when no generated text can be had. Every
// piece of the answer is also fed to sp (which may be nil).
func (r *run) answerText(ctx, dctx context.Context, res *Result, sp *speechRun) error {
	cfg := &r.p.cfg
	intent := Intent{}
	if res.Intent != nil {
		intent = *res.Intent
	}
	template := func(reason string) {
		if reason != "" {
			r.degrade(reason)
		}
		res.Answer = r.p.st.Templates.Template(intent, res.Transcript)
		res.Provider, res.Sources = "template", nil
		r.sink.AnswerDelta(res.Answer)
		sp.feed(res.Answer)
	}
	if r.p.st.LLM == nil || NoWords(res.Transcript) {
		template("")
		return nil
	}
	lctx, cancelL, err := cfg.LLM.Learned(&r.p.llmCost).Start(dctx, cfg.Reserve)
	if err != nil {
		if _, ok := errors.AsType[*deadline.BudgetError](err); ok {
			r.p.metrics.stage(StageLLM, "skipped", 0)
			template(ReasonLLMSkipped)
			return nil
		}
		return err
	}
	defer cancelL()
	res.LLMStarted = time.Now()
	r.p.metrics.llmStartLeft(deadline.Remaining(dctx))

	gate := &answerGate{out: func(piece string) {
		r.sink.AnswerDelta(piece)
		sp.feed(piece)
	}}
	var history []Turn
	if r.history != nil {
		history = r.history()
	}
	req := GenerateRequest{Transcript: res.Transcript, Intent: intent, Passages: res.Passages, History: history,
		Synthesis: sp.synthesis(), ConversationID: r.conversation, Tenant: r.tenant, Started: gate.started}
	start := time.Now()
	gen, err := await(lctx, &r.wg, func() (Generation, error) { return r.p.st.LLM.Generate(lctx, req, gate.emit) })
	d := time.Since(start)
	var from Generation
	res.Answer, from = gate.close()
	if gen.Provider == "" {
		gen = from // cut at the deadline: what it said it answered from
	}
	timedOut := err != nil && expired(lctx)
	outcome := outcomeOf(err)
	if timedOut && outcome == "error" {
		outcome = "timeout" // gave up with its own error as its budget ran out
	}
	r.timed(StageLLM, outcome, d)
	observeCost(ctx, &r.p.llmCost, d)

	if ctx.Err() != nil {
		return context.Cause(ctx) // cancelled: no answer at all
	}
	return r.settleAnswer(res, gen, err, timedOut, template)
}

// answerGate passes the generator's pieces on until it is closed: it keeps
// the answer and the deltas sent identical, and shuts out pieces from a
// generator that outlives its budget.
type answerGate struct {
	mu     sync.Mutex
	text   strings.Builder
	from   Generation // what the generator said it answers from (GenerateRequest.Started)
	closed bool
	out    func(piece string)
}

// started records what the answer comes from, until the gate closes.
func (g *answerGate) started(from Generation) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.closed {
		g.from = from
	}
}

func (g *answerGate) emit(piece string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed || piece == "" || (g.text.Len() == 0 && strings.TrimSpace(piece) == "") {
		// Whitespace before any word is held back: an answer that turns
		// out to be only whitespace is replaced by the template, and the
		// result's answer must be exactly the deltas sent.
		return
	}
	g.text.WriteString(piece)
	g.out(piece)
}

// close shuts the gate and returns the text passed.
func (g *answerGate) close() (string, Generation) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.closed = true
	return g.text.String(), g.from
}

// settleAnswer decides the answer once the generator has ended with gen
// and err (timedOut: out of its budget): the text it streamed, kept even
// when cut short, or the template when it streamed nothing; a policy block
// before any text is the request's error.
func (r *run) settleAnswer(res *Result, gen Generation, err error, timedOut bool, template func(reason string)) error {
	if err == nil {
		res.Provider, res.Model, res.Sources = gen.Provider, gen.Model, gen.Sources
		for _, why := range gen.Degradation {
			r.degrade(why)
		}
		if strings.TrimSpace(res.Answer) == "" {
			template(ReasonLLMEmpty)
		}
		return nil
	}
	if res.Answer == "" {
		switch {
		case errors.Is(err, ErrPolicyBlocked):
			return err
		case timedOut:
			template(ReasonLLMTimeout)
		default:
			r.log.Warn("answer generation failed", "err", err)
			template(ReasonLLMFailed)
		}
		return nil
	}
	// The client has the text: it is the answer, however the stream
	// ended, from what its generator announced (GenerateRequest.Started).
	res.Provider, res.Model, res.Sources = gen.Provider, gen.Model, gen.Sources
	for _, why := range gen.Degradation {
		r.degrade(why)
	}
	switch {
	case timedOut:
		r.degrade(ReasonLLMTimeout)
	case errors.Is(err, ErrPolicyBlocked):
		r.degrade(ReasonStreamInterrupted)
		r.degrade(ReasonPolicyBlocked)
	default:
		// Logged as a failure before any text is: nothing else reports
		// it (a generator's panic among them).
		r.log.Warn("answer stream broke", "err", err)
		r.degrade(ReasonStreamInterrupted)
	}
	return nil
}

// outcomeOf labels a stage's outcome for metrics.
func outcomeOf(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, cancel.RequestDeadline):
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "cancelled"
	default:
		if _, ok := errors.AsType[*cancel.Cause](err); ok {
			return "cancelled"
		}
		if _, ok := errors.AsType[*deadline.BudgetError](err); ok {
			return "skipped"
		}
		return "error"
	}
}

// genericTemplates answers when the domain has no template.
type genericTemplates struct{}

func (genericTemplates) Template(in Intent, transcript string) string {
	if NoWords(transcript) {
		return "Sorry, I didn't catch that. Could you say it again?"
	}
	return "Sorry, I can't give you a full answer right now. Please try again in a moment."
}
