// Package sim provides simulated pipeline stages: STT, intent, retrieval
// and LLM whose latencies follow configured heavy-tailed distributions
// (log-normal around a median, plus a share of calls ten times slower and
// a share of failures) and that honour their contexts exactly like the
// real engines do. `voiced --stages=sim` uses them to measure the server's
// own overhead and its deadline behaviour apart from the engines' cost,
// the way load tests of other voice frameworks use fake LLMs with
// scripted latency. They are never the default.
package sim

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/voiced/voiced/internal/pipeline"
)

// Defaults of Config.
const (
	DefaultSTTMedian       = 300 * time.Millisecond
	DefaultIntentMedian    = 40 * time.Millisecond
	DefaultRetrievalMedian = 60 * time.Millisecond
	DefaultLLMMedian       = 400 * time.Millisecond
	DefaultSigma           = 0.5
	DefaultSlowShare       = 0.02
	DefaultSlowFactor      = 10.0
	DefaultFailShare       = 0.005
	DefaultLLMPieces       = 8
	DefaultTranscript      = "how do I reset my password"
	DefaultAnswer          = "Open Settings, choose Account, then Reset password and follow the link we email you."
	DefaultIntentName      = "account.password_reset"
)

// Config sets the simulated stages. The zero value means the documented
// defaults. Because zero means "default", a share or a sigma is switched
// off with a negative value.
type Config struct {
	// Medians of each stage's latency. Defaults: STT 300 ms (the time
	// Finish takes), intent 40 ms, retrieval 60 ms, LLM 400 ms (the time
	// the whole answer takes to stream).
	STTMedian, IntentMedian, RetrievalMedian, LLMMedian time.Duration
	// Sigma is the log-normal shape: latency = median * exp(Sigma * N(0,1)).
	// Default 0.5; negative means 0 (every call takes exactly the median).
	Sigma float64
	// SlowShare is the share of calls that take SlowFactor times longer,
	// the heavy tail a GC pause, a cold cache or a queueing provider
	// gives. Default 0.02; negative means none.
	SlowShare float64
	// SlowFactor multiplies the latency of slow calls. Default 10.
	SlowFactor float64
	// FailShare is the share of calls that fail, after a uniformly random
	// part of their latency, with an error wrapping
	// pipeline.ErrUnavailable. Default 0.005; negative means none.
	FailShare float64
	// Seed seeds the random source, for reproducible runs. 0 seeds from
	// the clock.
	Seed uint64
	// Transcripts are returned by Finish in turn. Default one transcript,
	// DefaultTranscript.
	Transcripts []string
	// Answer is what the generator streams. Default DefaultAnswer.
	Answer string
	// LLMPieces is how many pieces the answer is streamed in, evenly
	// spread over the LLM latency. Default 8.
	LLMPieces int
	// IntentName is the intent the classifier returns. Default
	// DefaultIntentName.
	IntentName string
}

func (c Config) withDefaults() Config {
	dur := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	share := func(f *float64, v float64) {
		switch {
		case *f == 0 || math.IsNaN(*f):
			*f = v
		case *f < 0:
			*f = 0
		}
	}
	dur(&c.STTMedian, DefaultSTTMedian)
	dur(&c.IntentMedian, DefaultIntentMedian)
	dur(&c.RetrievalMedian, DefaultRetrievalMedian)
	dur(&c.LLMMedian, DefaultLLMMedian)
	share(&c.Sigma, DefaultSigma)
	share(&c.SlowShare, DefaultSlowShare)
	share(&c.FailShare, DefaultFailShare)
	if !(c.SlowFactor > 0) { // NaN too
		c.SlowFactor = DefaultSlowFactor
	}
	if c.Seed == 0 {
		c.Seed = uint64(time.Now().UnixNano())
	}
	if len(c.Transcripts) == 0 {
		c.Transcripts = []string{DefaultTranscript}
	} else {
		c.Transcripts = append([]string(nil), c.Transcripts...)
	}
	if c.Answer == "" {
		c.Answer = DefaultAnswer
	}
	if c.LLMPieces <= 0 {
		c.LLMPieces = DefaultLLMPieces
	}
	if c.IntentName == "" {
		c.IntentName = DefaultIntentName
	}
	return c
}

// Validate refuses a NaN or infinite shape, and a negative median, slow
// factor or piece count, which the defaults would otherwise quietly
// replace: a load test must simulate what its flags say.
func (c Config) Validate() error {
	for name, f := range map[string]float64{
		"sim-sigma": c.Sigma, "sim-slow-share": c.SlowShare, "sim-slow-factor": c.SlowFactor, "sim-fail-share": c.FailShare,
	} {
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return fmt.Errorf("-%s %v: must be a finite number", name, f)
		}
	}
	for name, d := range map[string]time.Duration{
		"sim-stt-median": c.STTMedian, "sim-intent-median": c.IntentMedian, "sim-retrieval-median": c.RetrievalMedian, "sim-llm-median": c.LLMMedian,
	} {
		if d < 0 {
			return fmt.Errorf("-%s %v: must not be negative (0: the default)", name, d)
		}
	}
	if c.SlowFactor < 0 {
		return fmt.Errorf("-sim-slow-factor %v: must not be negative (0: the default)", c.SlowFactor)
	}
	if c.LLMPieces < 0 {
		return fmt.Errorf("-sim-llm-pieces %d: must not be negative (0: the default)", c.LLMPieces)
	}
	return nil
}

// RegisterFlags registers the -sim-* flags on fs, bound to c's fields.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.DurationVar(&c.STTMedian, "sim-stt-median", DefaultSTTMedian, "sim stages: median STT finalisation latency (0: the default)")
	fs.DurationVar(&c.IntentMedian, "sim-intent-median", DefaultIntentMedian, "sim stages: median intent latency (0: the default)")
	fs.DurationVar(&c.RetrievalMedian, "sim-retrieval-median", DefaultRetrievalMedian, "sim stages: median retrieval latency (0: the default)")
	fs.DurationVar(&c.LLMMedian, "sim-llm-median", DefaultLLMMedian, "sim stages: median time to stream the whole answer (0: the default)")
	fs.Float64Var(&c.Sigma, "sim-sigma", DefaultSigma, "sim stages: log-normal sigma of every stage's latency (0: the default; negative: none)")
	fs.Float64Var(&c.SlowShare, "sim-slow-share", DefaultSlowShare, "sim stages: share of calls -sim-slow-factor times slower (0: the default; negative: none)")
	fs.Float64Var(&c.SlowFactor, "sim-slow-factor", DefaultSlowFactor, "sim stages: how much slower the slow calls are (0: the default)")
	fs.Float64Var(&c.FailShare, "sim-fail-share", DefaultFailShare, "sim stages: share of calls that fail as unavailable (0: the default; negative: none)")
	fs.Uint64Var(&c.Seed, "sim-seed", 0, "sim stages: random seed (0: from the clock)")
	fs.IntVar(&c.LLMPieces, "sim-llm-pieces", DefaultLLMPieces, "sim stages: pieces the answer is streamed in (0: the default)")
	fs.Func("sim-transcript", "sim stages: transcript returned by STT; repeat the flag to return several in turn (default \""+DefaultTranscript+"\")", func(s string) error {
		c.Transcripts = append(c.Transcripts, s)
		return nil
	})
}

// Stages are the four simulated stages, sharing one random source.
type Stages struct {
	STT       *Transcriber
	Intent    *Classifier
	Retrieval *Retriever
	LLM       *Generator
}

// New returns simulated stages configured by cfg.
func New(cfg Config) *Stages {
	cfg = cfg.withDefaults()
	src := &source{cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15))}
	return &Stages{
		STT:       &Transcriber{src: src, median: cfg.STTMedian},
		Intent:    &Classifier{src: src, median: cfg.IntentMedian},
		Retrieval: &Retriever{src: src, median: cfg.RetrievalMedian},
		LLM:       &Generator{src: src, median: cfg.LLMMedian},
	}
}

var (
	_ pipeline.Transcriber = (*Transcriber)(nil)
	_ pipeline.Recognizer  = (*Recognizer)(nil)
	_ pipeline.Classifier  = (*Classifier)(nil)
	_ pipeline.Retriever   = (*Retriever)(nil)
	_ pipeline.Generator   = (*Generator)(nil)
)

// call is one sampled stage call: how long it takes, and whether it fails
// (after failAt of that time).
type call struct {
	latency time.Duration
	fail    bool
	failAt  time.Duration
}

// source is the random source shared by the stages. *rand.Rand is not
// safe for concurrent use, and stages are called from many sessions.
type source struct {
	cfg  Config
	mu   sync.Mutex
	rng  *rand.Rand // guarded by mu
	next atomic.Uint64
}

// sample draws one call of a stage whose latency has the given median;
// the rest of the distribution's shape is the same for every stage.
func (s *source) sample(median time.Duration) call {
	s.mu.Lock()
	norm, slow, fail, failAt := s.rng.NormFloat64(), s.rng.Float64(), s.rng.Float64(), s.rng.Float64()
	s.mu.Unlock()
	lat := float64(median) * math.Exp(s.cfg.Sigma*norm)
	if slow < s.cfg.SlowShare {
		lat *= s.cfg.SlowFactor
	}
	// A float out of a Duration's range (an Inf, a huge factor) converts
	// to an implementation-defined, on amd64 negative, Duration.
	c := call{latency: time.Duration(math.MaxInt64)}
	if lat < float64(math.MaxInt64) {
		c.latency = time.Duration(max(lat, 0))
	}
	if fail < s.cfg.FailShare {
		c.fail = true
		c.failAt = time.Duration(failAt * float64(c.latency))
	}
	return c
}

// transcript returns the scripted transcripts in turn.
func (s *source) transcript() string {
	ts := s.cfg.Transcripts
	return ts[int((s.next.Add(1)-1)%uint64(len(ts)))]
}

// errFailed is the error of a simulated failure.
func errFailed(stage string) error {
	return fmt.Errorf("sim %s: simulated failure: %w", stage, pipeline.ErrUnavailable)
}

// wait waits d or until ctx is done, whichever comes first, and returns
// ctx's cause in the second case. A context already done returns at once
// even when d is zero, as a real engine checks its context first.
func wait(ctx context.Context, stage string, d time.Duration) error {
	if ctx.Err() != nil {
		return fmt.Errorf("sim %s: %w", stage, context.Cause(ctx))
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return fmt.Errorf("sim %s: %w", stage, context.Cause(ctx))
	case <-t.C:
		return nil
	}
}

// run waits out one sampled call and returns its failure, if it fails.
func run(ctx context.Context, stage string, c call) error {
	if c.fail {
		if err := wait(ctx, stage, c.failAt); err != nil {
			return err
		}
		return errFailed(stage)
	}
	return wait(ctx, stage, c.latency)
}

// Transcriber is a simulated streaming STT engine: writes are cheap, and
// Finish takes the sampled STT latency.
type Transcriber struct {
	src    *source
	median time.Duration
}

// ErrSampleRate is returned by Start for a sample rate that is not positive.
var ErrSampleRate = errors.New("sim stt: sample rate must be positive")

// Start opens a recognizer; it never waits for a decoder.
func (t *Transcriber) Start(ctx context.Context, sampleRate int) (pipeline.Recognizer, error) {
	if ctx.Err() != nil {
		return nil, fmt.Errorf("sim stt: %w", context.Cause(ctx))
	}
	if sampleRate <= 0 {
		return nil, fmt.Errorf("%w: got %d: %w", ErrSampleRate, sampleRate, pipeline.ErrBadAudio)
	}
	text := t.src.transcript()
	return &Recognizer{t: t, rate: sampleRate, text: text, words: strings.Fields(text)}, nil
}

// Recognizer is one simulated utterance.
type Recognizer struct {
	t       *Transcriber
	rate    int
	text    string
	words   []string
	samples int
	// heard and partial are the last partial and its word count: a
	// frame that adds no word costs no allocation, as the server's CPU
	// per frame is measured with these stages.
	heard   int
	partial string
}

// Write counts the samples and returns a partial that grows with the
// audio: one word per half second heard, as a real recogniser's partials
// grow.
func (r *Recognizer) Write(ctx context.Context, pcm []int16) (string, error) {
	if ctx.Err() != nil {
		return "", fmt.Errorf("sim stt: %w", context.Cause(ctx))
	}
	r.samples += len(pcm)
	if n := min(len(r.words), r.samples*2/r.rate); n != r.heard {
		r.heard, r.partial = n, strings.Join(r.words[:n], " ")
	}
	return r.partial, nil
}

// Finish waits the sampled STT latency and returns the transcript.
func (r *Recognizer) Finish(ctx context.Context) (string, error) {
	if err := run(ctx, "stt", r.t.src.sample(r.t.median)); err != nil {
		return "", err
	}
	return r.text, nil
}

// Close releases nothing; a simulated recognizer holds no decoder.
func (r *Recognizer) Close() error { return nil }

// Classifier is a simulated intent classifier returning the configured
// intent.
type Classifier struct {
	src    *source
	median time.Duration
}

// Classify waits the sampled intent latency and returns the configured
// intent with confidence 0.9.
func (c *Classifier) Classify(ctx context.Context, text string) (pipeline.Intent, error) {
	if err := run(ctx, "intent", c.src.sample(c.median)); err != nil {
		return pipeline.Intent{}, err
	}
	return pipeline.Intent{Name: c.src.cfg.IntentName, Confidence: 0.9}, nil
}

// Retriever is a simulated retriever returning synthetic passages.
type Retriever struct {
	src    *source
	median time.Duration
}

// Retrieve waits the sampled retrieval latency and returns k passages
// with decreasing scores.
func (r *Retriever) Retrieve(ctx context.Context, query string, k int) ([]pipeline.Passage, error) {
	if err := run(ctx, "retrieval", r.src.sample(r.median)); err != nil {
		return nil, err
	}
	ps := make([]pipeline.Passage, 0, max(k, 0))
	for i := range k {
		ps = append(ps, pipeline.Passage{
			ID:    fmt.Sprintf("sim-%d", i+1),
			Title: fmt.Sprintf("Simulated article %d", i+1),
			Text:  "Simulated passage text.",
			Score: 1 / float64(i+2),
		})
	}
	return ps, nil
}

// Generator is a simulated streaming LLM.
type Generator struct {
	src    *source
	median time.Duration
}

// Generate streams the configured answer in LLMPieces pieces spread
// evenly over the sampled LLM latency, from the calling goroutine. A
// failing call fails after a random part of its latency, possibly after
// some pieces were emitted, as a real stream that breaks.
func (g *Generator) Generate(ctx context.Context, req pipeline.GenerateRequest, emit func(piece string)) (pipeline.Generation, error) {
	gen := pipeline.Generation{Provider: "sim", Model: "lognormal"}
	c := g.src.sample(g.median)
	pieces := split(g.src.cfg.Answer, g.src.cfg.LLMPieces)
	if ctx.Err() != nil {
		return gen, fmt.Errorf("sim llm: %w", context.Cause(ctx))
	}
	start := time.Now()
	// One timer, reset per piece against the start time so that the
	// pieces do not drift from the sampled latency.
	var t *time.Timer
	defer func() {
		if t != nil {
			t.Stop()
		}
	}()
	for i, p := range pieces {
		// Divided first: latency*(i+1) overflows for a huge latency.
		n := time.Duration(len(pieces))
		at := c.latency/n*time.Duration(i+1) + c.latency%n*time.Duration(i+1)/n
		if c.fail && at > c.failAt {
			at = c.failAt
		}
		if t == nil {
			t = time.NewTimer(time.Until(start.Add(at)))
		} else {
			t.Reset(time.Until(start.Add(at)))
		}
		select {
		case <-ctx.Done():
			return gen, fmt.Errorf("sim llm: %w", context.Cause(ctx))
		case <-t.C:
		}
		if c.fail && at >= c.failAt {
			return gen, errFailed("llm")
		}
		if i == 0 && req.Started != nil {
			req.Started(gen)
		}
		emit(p)
	}
	return gen, nil
}

// split cuts s into at most n pieces at word boundaries, keeping the
// spaces so that the pieces concatenate back to s.
func split(s string, n int) []string {
	words := strings.SplitAfter(s, " ")
	n = min(n, len(words))
	pieces := make([]string, 0, n)
	for i := range n {
		lo, hi := i*len(words)/n, (i+1)*len(words)/n
		pieces = append(pieces, strings.Join(words[lo:hi], ""))
	}
	return pieces
}
