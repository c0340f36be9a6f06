package sphinx

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/voiced/voiced/internal/audio/resample"
	"github.com/voiced/voiced/internal/pipeline"
	"github.com/voiced/voiced/internal/stages/stt/lm"
	"github.com/voiced/voiced/internal/stages/stt/pool"
)

// Engine is the embedded recogniser. It satisfies pipeline.Transcriber.
type Engine struct {
	cfg        Config
	log        *slog.Logger
	pool       *pool.Pool[*decoder]
	gate       *gate // CPUs for decoding, final passes first
	domain     DomainLM
	resamplers map[int]*resample.Resampler // prototypes by input rate
	band       bandSplitter                // finds narrowband audio at higher rates
	closed     atomic.Bool
	active     atomic.Int64 // recognizers open: utterances in progress
	seconds    atomic.Int64 // second model decoders in use (Config.SecondModel)

	utterances      *prometheus.CounterVec
	finalise        prometheus.Histogram
	cpuWait         *prometheus.HistogramVec
	searches        *prometheus.CounterVec
	narrowband      *prometheus.CounterVec
	foldedRate      prometheus.Counter // narrowband's series
	foldedSeen      prometheus.Counter
	warp            *prometheus.CounterVec
	warped          prometheus.Counter // warp's series
	unwarped        prometheus.Counter
	second          *prometheus.CounterVec
	secondChosen    prometheus.Counter // second's series
	secondKept      prometheus.Counter
	secondLate      prometheus.Counter
	secondFailed    prometheus.Counter
	secondNone      prometheus.Counter
	secondPreempted prometheus.Counter
	waitFinal       prometheus.Observer // cpuWait's series
	waitStream      prometheus.Observer
	audio           prometheus.Counter
	decoding        prometheus.Counter
}

var _ pipeline.Transcriber = (*Engine)(nil)

// New builds the domain language model from corpus (intent examples and
// knowledge-base text; unused in the general and file LM modes), then
// builds and warms the decoder pool. It returns once every decoder is
// ready, so a server may report ready as soon as it has an Engine.
func New(ctx context.Context, cfg Config, corpus []string, log *slog.Logger, reg prometheus.Registerer) (*Engine, error) {
	if !cgoAvailable {
		_, err := newDecoder(cfg, lmSpec{}, nil)
		return nil, err
	}
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.Acoustic == AcousticAdapted {
		args, err := adaptedArgs(cfg.CacheDir)
		if err != nil {
			return nil, err
		}
		cfg.adaptedArgs = args
	}
	paths, err := channelTransforms(cfg.CacheDir, [numChannels]bool{chanNarrow: cfg.transformsNarrowband(), chanSecond: cfg.secondModel()})
	if err != nil {
		return nil, err
	}
	cfg.channels = paths
	e := &Engine{cfg: cfg, log: log, resamplers: map[int]*resample.Resampler{}}
	for _, r := range SupportedRates {
		rs, err := resample.New(r, modelRate)
		if err != nil {
			return nil, fmt.Errorf("sphinx: %w", err)
		}
		e.resamplers[r] = rs
	}
	band, err := newBandSplitter()
	if err != nil {
		return nil, fmt.Errorf("sphinx: %w", err)
	}
	e.band = band
	prons, err := cfg.ReadPronunciations()
	if err != nil {
		return nil, err
	}
	spec, err := e.languageModel(corpus, prons)
	if err != nil {
		return nil, err
	}
	e.gate = newGate(cfg.Parallel)
	if err := e.startPool(ctx, spec, prons, reg); err != nil {
		return nil, err
	}
	if err := e.registerMetrics(reg); err != nil {
		_ = e.Close()
		return nil, err
	}
	return e, nil
}

// ReadPronunciations reads the pronunciations the recogniser adds to its
// dictionary, from the file or from the data given; none without either.
func (cfg Config) ReadPronunciations() ([]lm.Pronunciation, error) {
	switch {
	case cfg.Pronunciations != "":
		return lm.ReadPronunciations(cfg.Pronunciations)
	case cfg.PronunciationsData != nil:
		return lm.ParsePronunciations(bytes.NewReader(cfg.PronunciationsData), cfg.pronunciationsName())
	}
	return nil, nil
}

// pronunciationsName names the pronunciations in errors: the file, or
// "domain pronunciations" for data given in memory.
func (cfg Config) pronunciationsName() string {
	if cfg.Pronunciations != "" {
		return cfg.Pronunciations
	}
	return "domain pronunciations"
}

// languageModel says which language models the decoders load, building
// the domain's from corpus when the configuration asks for it.
func (e *Engine) languageModel(corpus []string, prons []lm.Pronunciation) (lmSpec, error) {
	cfg, log := e.cfg, e.log
	spec := lmSpec{weight: cfg.DomainWeight}
	switch cfg.LM {
	case LMGeneral:
		spec.general = cfg.GeneralLM
	case LMFile:
		spec.general = cfg.LMPath
	case LMInterp, LMDomain:
		dict, err := lm.DictionaryWords(cfg.Dict)
		if err != nil {
			return spec, err
		}
		for _, p := range prons {
			dict[p.Word] = true
		}
		start := time.Now()
		e.domain, err = buildDomainLM(cfg, corpus, func(w string) bool { return dict[w] })
		if err != nil {
			return spec, err
		}
		log.Info("stt domain language model ready", "path", e.domain.Path, "cached", e.domain.Cached,
			"sentences", e.domain.Sentences, "words", e.domain.Words, "took", time.Since(start).Round(time.Millisecond))
		if n := len(e.domain.Missing); n > 0 {
			// Domain words, not user speech: fine to log.
			log.Warn("stt domain words missing from the pronunciation dictionary; add them to a pronunciations file",
				"count", n, "words", strings.Join(e.domain.Missing[:min(n, 40)], " "))
		}
		spec.domain = e.domain.Path
		if cfg.LM == LMInterp {
			spec.general = cfg.GeneralLM
		}
	}
	return spec, nil
}

// startPool builds and warms the decoders.
func (e *Engine) startPool(ctx context.Context, spec lmSpec, prons []lm.Pronunciation, reg prometheus.Registerer) error {
	cfg := e.cfg
	start := time.Now()
	p, err := pool.New(ctx, pool.Config{Size: cfg.Decoders, Workers: max(1, min(4, cfg.Decoders)), MaxWait: cfg.MaxWait, Name: "sphinx"},
		pool.Funcs[*decoder]{
			Build: func(ctx context.Context) (*decoder, error) {
				// A build is a third of a second of CPU, and the pool
				// rebuilds decoders while utterances are decoded (a long
				// abandoned utterance's, decoder.reset): it takes a CPU of
				// the gate, as decoding does, rather than one of theirs.
				if err := e.gate.acquire(ctx, false); err != nil {
					return nil, err
				}
				defer e.gate.release()
				return newDecoder(cfg, spec, prons)
			},
			Reset: func(ctx context.Context, d *decoder) error {
				// Ending an abandoned utterance runs its final pass: CPU
				// work like any other, but nobody is waiting for it (a
				// long one is not ended: reset has the pool replace the
				// decoder). The wait for a CPU ends with the pool (ctx): a
				// final pass that holds one past Close's bound must not
				// hold Close.
				if err := e.gate.acquire(ctx, false); err != nil {
					return err
				}
				defer e.gate.release()
				return d.reset()
			},
			Destroy: func(d *decoder) { d.free() },
		}, e.log, reg)
	if err != nil {
		return fmt.Errorf("sphinx: %w", err)
	}
	e.pool = p
	e.log.Info("stt decoders warm", "decoders", cfg.Decoders, "acoustic", cfg.Acoustic, "narrowband_acoustic", cfg.NarrowbandAcoustic,
		"narrowband_transformed", cfg.channels[chanNarrow] != "", "second_model", cfg.channels[chanSecond] != "", "lm", cfg.LM, "domain_weight", cfg.DomainWeight,
		"speaker_warp", cfg.SpeakerWarp, "warp_pitch", cfg.WarpPitch,
		"search", cfg.Search, "busy_search", cfg.BusySearch, "busy_above", cfg.BusyAbove, "parallel", cfg.Parallel,
		"took", time.Since(start).Round(time.Millisecond))
	return nil
}

// registerMetrics makes the engine's metrics and registers them on reg
// when it is not nil.
func (e *Engine) registerMetrics(reg prometheus.Registerer) error {
	e.utterances = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "voiced_stt_utterances_total",
		Help: "Utterances recognised by the embedded engine, by outcome."}, []string{"outcome"})
	e.finalise = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "voiced_stt_finalise_seconds",
		Help:    "Time from the end of the audio to the final transcript.",
		Buckets: []float64{.005, .01, .025, .05, .1, .15, .2, .3, .5, 1, 2}})
	e.cpuWait = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "voiced_stt_cpu_wait_seconds",
		Help:    "Time decoding work waited for a CPU (-stt.parallel), by priority: final (a final pass or an utterance whose final frame has arrived) or stream.",
		Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25}}, []string{"priority"})
	e.searches = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "voiced_stt_searches_total",
		Help: "Utterances started, by search setting (-stt.search, or -stt.busy-search when more than -stt.busy-above were in progress)."}, []string{"search"})
	e.narrowband = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "voiced_stt_narrowband_total",
		Help: "Utterances folded above 4 kHz (-stt.narrowband-fold), by how they were found narrowband: rate (audio at 8 kHz) or detected (audio at a higher rate with nothing above 4.5 kHz)."}, []string{"found"})
	e.foldedRate, e.foldedSeen = e.narrowband.WithLabelValues("rate"), e.narrowband.WithLabelValues("detected")
	e.warp = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "voiced_stt_speaker_warp_total",
		Help: "Utterances by whether their spectrum was warped for a high voice (-stt.speaker-warp): yes or no."}, []string{"warped"})
	e.warped, e.unwarped = e.warp.WithLabelValues("yes"), e.warp.WithLabelValues("no")
	e.second = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "voiced_stt_second_model_total",
		Help: "Wideband utterances that started while the engine was not busy, by what the second model (-stt.second-model) did: chosen (its transcript kept), kept (the first model's kept), late (its final pass not done in time), failed, none (no CPU of -stt.parallel left for it, or no decoder free beyond -stt.busy-above), or preempted (dropped mid-utterance for an utterance that started since)."}, []string{"outcome"})
	e.secondChosen, e.secondKept, e.secondLate = e.second.WithLabelValues("chosen"), e.second.WithLabelValues("kept"), e.second.WithLabelValues("late")
	e.secondFailed, e.secondNone = e.second.WithLabelValues("failed"), e.second.WithLabelValues("none")
	e.secondPreempted = e.second.WithLabelValues("preempted")
	e.waitFinal, e.waitStream = e.cpuWait.WithLabelValues("final"), e.cpuWait.WithLabelValues("stream")
	e.audio = prometheus.NewCounter(prometheus.CounterOpts{Name: "voiced_stt_audio_seconds_total",
		Help: "Seconds of audio decoded."})
	e.decoding = prometheus.NewCounter(prometheus.CounterOpts{Name: "voiced_stt_decode_seconds_total",
		Help: "Seconds spent decoding; divided by audio seconds it is the real-time factor."})
	if reg == nil {
		return nil
	}
	for _, c := range []prometheus.Collector{e.utterances, e.finalise, e.cpuWait, e.searches, e.narrowband, e.warp, e.second, e.audio, e.decoding} {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("sphinx: register metrics: %w", err)
		}
	}
	return nil
}

// Ready reports whether the engine can take utterances: always, between New
// and Close.
func (e *Engine) Ready() bool { return e != nil && !e.closed.Load() }

// Domain describes the domain language model (zero in the general and file
// modes).
func (e *Engine) Domain() DomainLM { return e.domain }

// Decoders is the pool size.
func (e *Engine) Decoders() int { return e.pool.Size() }

// Close waits (up to 10 s) for recognisers still open to be closed, then
// frees every decoder.
func (e *Engine) Close() error {
	if e.closed.Swap(true) {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return e.pool.Close(ctx)
}

// Start takes a decoder for one utterance of 16-bit mono PCM at sampleRate.
func (e *Engine) Start(ctx context.Context, sampleRate int) (pipeline.Recognizer, error) {
	proto, ok := e.resamplers[sampleRate]
	if !ok {
		e.utterances.WithLabelValues("bad_audio").Inc()
		return nil, fmt.Errorf("sphinx: sample rate %d Hz not supported (want one of %v): %w", sampleRate, SupportedRates, pipeline.ErrBadAudio)
	}
	d, err := e.pool.Acquire(ctx)
	if err != nil {
		switch {
		case errors.Is(err, pipeline.ErrOverloaded):
			e.utterances.WithLabelValues("overloaded").Inc()
		case errors.Is(err, pool.ErrClosed):
			return nil, fmt.Errorf("sphinx: engine closed: %w", pipeline.ErrUnavailable)
		}
		return nil, fmt.Errorf("sphinx: %w", err)
	}
	// The load an utterance starts under decides its search: a second
	// pass for every utterance would push finalisation on a busy machine
	// past what a caller will wait.
	search := e.cfg.Search
	busy := e.active.Add(1) > int64(e.cfg.BusyAbove)
	if busy {
		search = e.cfg.BusySearch
	}
	narrow := sampleRate <= narrowbandRate
	// Starting decodes too (the priming silence) and may switch the
	// acoustic model between the bands (4-15 ms of CPU): a CPU of the
	// gate, like every other call into the decoder.
	err = e.gate.acquire(ctx, false)
	if err == nil {
		err = d.start(search, channelOf(narrow), false)
		e.gate.release()
	}
	if err != nil {
		e.active.Add(-1)
		e.pool.Release(d, false)
		return nil, fmt.Errorf("sphinx: start: %w", err)
	}
	e.searches.WithLabelValues(search).Inc()
	fold := newFolder(sampleRate, e.cfg.NarrowbandFold)
	if fold.gain != 0 {
		e.foldedRate.Inc()
	}
	every := int64(e.cfg.PartialEvery.Seconds() * modelRate)
	return &recognizer{
		e: e, d: d, rs: proto.Clone(), rate: sampleRate, fold: fold, search: search, narrow: narrow,
		detect:       sampleRate > narrowbandRate && e.cfg.NarrowbandFold > 0,
		wantSecond:   !narrow && !busy && e.cfg.channels[chanSecond] != "",
		partialEvery: every,
		nextPartial:  every,
		cmnSamples:   int(e.cfg.CMNWindow.Seconds() * modelRate),
		maxSamples:   int64(e.cfg.MaxUtterance.Seconds() * modelRate),
	}, nil
}

// block is how much audio each cgo call decodes (40 ms at 16 kHz). The
// decoder is always fed whole blocks, whatever sizes the client's frames
// have, because PocketSphinx's results depend slightly on how the audio
// is split (measured: the same 8 kHz utterance decoded right in 40 ms
// chunks and wrong in 20 ms ones); fixed blocks make a transcript
// independent of the client's framing. One block per call also bounds how
// long a cancelled utterance takes to notice.
const block = modelRate / 25

// recognizer is one utterance on one decoder.
type recognizer struct {
	e      *Engine
	rs     *resample.Resampler
	rate   int    // the input's, for Covered
	fold   folder // for narrowband input
	detect bool   // look for narrowband audio in the window (cmnWindow)
	narrow bool   // heard as narrowband audio (Config.NarrowbandAcoustic)
	search string // the search setting the utterance runs with
	// wantSecond says the utterance is decoded by the second model too
	// (Config.SecondModel) if it is still wideband once its window is
	// in and a decoder is free then.
	wantSecond bool

	// mu guards against a Close racing a Write or Finish: the decoder
	// must not go back to the pool while a cgo call is using it.
	mu           sync.Mutex
	d            *decoder // nil once closed
	second       *decoder // the second model's, fed the same audio; nil without one
	buf          []int16  // resampled audio not yet decoded (< block after each Write)
	samples      int64    // 16 kHz samples decoded
	nextPartial  int64
	partial      string
	partialAt    int64 // the 16 kHz samples partial covers
	partialEvery int64
	maxSamples   int64
	finished     bool
	counted      bool           // the utterance's outcome is in voiced_stt_utterances_total
	hurried      atomic.Bool    // the final frame has arrived (Hurry)
	ending       chan endResult // a final pass Finish stopped waiting for
	endingSecond chan endResult // and the second model's
	cmnSamples   int            // audio the cepstral mean is estimated from (cmnWindow)
	cmnSet       bool
	speech       speechFinder // where the window starts, until cmnSet
	firstPass    string       // the first pass's hypothesis over the whole utterance, set by Finish
	alts         []pipeline.Hypothesis
	nbestTook    time.Duration // the N-best search's share of the final pass
	nbestCPU     time.Duration // and the CPU time it took
}

var (
	_ pipeline.Recognizer = (*recognizer)(nil)
	_ pipeline.Hurrier    = (*recognizer)(nil)
	_ pipeline.Degrader   = (*recognizer)(nil)
	_ pipeline.Alternator = (*recognizer)(nil)
	_ pipeline.Coverer    = (*recognizer)(nil)
)

var errClosed = errors.New("sphinx: recognizer closed")

// errBroken is the reset of a decoder a call into PocketSphinx failed on.
var errBroken = errors.New("sphinx: decoder failed earlier; rebuilding it")

// Write decodes pcm and returns the current partial hypothesis, refreshed
// every Config.PartialEvery of audio (so a caller sending every returned
// change sends at most a few per second).
func (r *recognizer) Write(ctx context.Context, pcm []int16) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.d == nil {
		return "", errClosed
	}
	if r.finished {
		return "", errors.New("sphinx: write after finish")
	}
	if err := ctx.Err(); err != nil {
		r.count(outcomeOf(ctx, err))
		return "", err
	}
	n := len(r.buf)
	r.buf = r.rs.Process(r.buf, pcm)
	r.fold.apply(r.buf[n:])
	if err := r.decode(ctx, false); err != nil {
		r.count(outcomeOf(ctx, err))
		return "", err
	}
	// Refreshed after the final frame too, as urgent work: the pipeline
	// falls back to the last partial if finalisation runs out of time, and
	// it should cover the audio that was queued.
	if r.samples >= r.nextPartial {
		err := r.compute(ctx, r.hurried.Load(), func() error {
			r.partial, r.partialAt = r.d.hyp(), r.samples
			return nil
		})
		if err != nil {
			r.count(outcomeOf(ctx, err))
			return "", err
		}
		r.nextPartial = r.samples + r.partialEvery
	}
	return r.partial, nil
}

// Covered returns how many input samples the partial Write returned
// covers: the audio decoded when it was refreshed, not what is buffered
// (under a block) or came since.
func (r *recognizer) Covered() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.partialAt * int64(r.rate) / modelRate
}

// Degradation reports an utterance given the busy search instead of the
// engine's own.
func (r *recognizer) Degradation() string {
	if r.search != r.e.cfg.Search {
		return pipeline.ReasonSTTBusy
	}
	return ""
}

// Hurry tells the recognizer that the utterance's final frame has arrived:
// from now on its audio, however much of it is still queued, and its final
// pass are what a caller is waiting for, and go ahead of other streams.
func (r *recognizer) Hurry() { r.hurried.Store(true) }

// acquire takes a CPU from the gate, recording the wait, and returns when
// it was had; the caller releases it.
func (r *recognizer) acquire(ctx context.Context, urgent bool) (time.Time, error) {
	start := time.Now()
	if err := r.e.gate.acquire(ctx, urgent); err != nil {
		return time.Time{}, err
	}
	began := time.Now()
	wait := r.e.waitStream
	if urgent {
		wait = r.e.waitFinal
	}
	wait.Observe(began.Sub(start).Seconds())
	return began, nil
}

// compute runs fn, a call into the decoder, once the gate gives it a CPU.
func (r *recognizer) compute(ctx context.Context, urgent bool, fn func() error) error {
	began, err := r.acquire(ctx, urgent)
	if err != nil {
		return err
	}
	defer r.e.gate.release()
	err = fn()
	r.e.decoding.Add(time.Since(began).Seconds())
	return err
}

// decode feeds the buffered 16 kHz audio to the decoder a block at a
// time, and with final set also the last partial block.
func (r *recognizer) decode(ctx context.Context, final bool) error {
	if r.samples+int64(len(r.buf)) > r.maxSamples {
		return fmt.Errorf("sphinx: utterance longer than %v: %w", r.e.cfg.MaxUtterance, pipeline.ErrBadAudio)
	}
	if !r.cmnSet {
		// The window is the start of the speech, not of the audio
		// (window.go): a pause before the first word is held, undecoded,
		// until CMNWindow of what follows it has come.
		from, ready := r.speech.cmnWindow(r.buf, r.cmnSamples, final)
		if !ready {
			return nil // still gathering the start of the utterance
		}
		window := r.buf[from:min(len(r.buf), from+r.cmnSamples)]
		restart := r.detect && r.detectNarrowband(window)
		var warp bool
		err := r.compute(ctx, final || r.hurried.Load(), func() error {
			// The pitch is estimated on the gate's CPU too: 1-2 ms.
			warp = r.e.cfg.SpeakerWarp > 0 && r.highVoice(window)
			if restart || warp {
				// Before any of its audio is decoded, the utterance starts
				// again on the narrowband model (Config.NarrowbandAcoustic),
				// so that it is heard exactly as if it had arrived at 8 kHz,
				// or with its spectrum warped (Config.SpeakerWarp).
				if err := r.d.start(r.search, channelOf(r.narrow), warp); err != nil {
					return err
				}
			}
			r.d.estimateCMN(window)
			return nil
		})
		if err != nil {
			return err
		}
		r.cmnSet = true
		r.speech = speechFinder{} // done with
		if r.wantSecond && !r.narrow {
			if err := r.startSecond(ctx, final, warp, window); err != nil {
				return err
			}
		}
	}
	pcm := r.buf
	for len(pcm) >= block || (final && len(pcm) > 0) {
		r.preemptSecond()
		n := min(len(pcm), block)
		// One block per CPU turn: a final pass waits for a CPU behind no
		// more than a block of streaming audio (urgent work queued before
		// it still goes first), and a cancelled utterance stops within a
		// block.
		if err := r.compute(ctx, final || r.hurried.Load(), func() error { return r.process(pcm[:n]) }); err != nil {
			return err
		}
		r.samples += int64(n)
		r.e.audio.Add(float64(n) / modelRate)
		pcm = pcm[n:]
	}
	r.buf = append(r.buf[:0], pcm...)
	return nil
}

// startSecond gives the utterance a second decoder, on the second model
// (Config.SecondModel), when a CPU of the gate is left for it (utterances
// and second decoders in progress fewer than Config.Parallel) and a
// decoder is free beyond the BusyAbove that utterances starting now may
// need: started as the first was, with the same warp and the cepstral
// mean of the same window, before any audio is decoded, so that from here
// on both hear the same blocks.
func (r *recognizer) startSecond(ctx context.Context, final, warp bool, window []int16) error {
	e := r.e
	r.wantSecond = false
	// Two utterances with a second model each on two CPUs end with four
	// final passes on two CPUs: finalisation p99 at two streams went
	// from 149 to 204 ms (make bench-stt, docs/benchmarks.md).
	if !e.reserveSecond() {
		e.secondNone.Inc()
		return nil
	}
	d, ok := e.pool.TryAcquire(e.cfg.BusyAbove)
	if !ok {
		e.seconds.Add(-1)
		e.secondNone.Inc()
		return nil
	}
	err := r.compute(ctx, final || r.hurried.Load(), func() error {
		if err := d.start(r.search, chanSecond, warp); err != nil {
			return err
		}
		d.estimateCMN(window)
		return nil
	})
	if err != nil {
		e.pool.Release(d, false)
		e.seconds.Add(-1)
		if ctx.Err() != nil {
			return err
		}
		// A decoder that failed to start is the pool's to rebuild; the
		// utterance goes on with one.
		e.secondFailed.Inc()
		return nil
	}
	r.second = d
	return nil
}

// reserveSecond counts a second model in (Engine.seconds) when the gate
// has a CPU left for it: fewer utterances and second models in progress
// than Config.Parallel. The check and the count are one compare-and-swap,
// so two utterances that reach their windows at the same instant cannot
// both take the last CPU; an utterance that starts after the reservation
// is preempt's to settle.
func (e *Engine) reserveSecond() bool {
	for {
		s := e.seconds.Load()
		if e.active.Load()+s >= int64(e.cfg.Parallel) {
			return false
		}
		if e.seconds.CompareAndSwap(s, s+1) {
			return true
		}
	}
}

// preemptSecond drops the utterance's second model when utterances that
// started since need its CPU (Engine.preempt): the second model uses
// only a CPU nobody else wants, for as long as nobody does. Without this
// an utterance that started alone kept its second model to its end, and
// 12 streams on two CPUs went over 200 ms in one run of two (make
// bench-stt, docs/benchmarks.md). The decoder goes back mid-utterance,
// for the pool to reset; r.mu is held.
func (r *recognizer) preemptSecond() {
	if r.second == nil || !r.e.preempt() {
		return
	}
	d := r.second
	r.second = nil
	r.e.giveBack(d, nil, nil) // preempt took it off Engine.seconds
	r.e.secondPreempted.Inc()
}

// preempt reports whether a second model in progress should give its CPU
// back because more utterances and second models are in progress than
// the gate has CPUs (Config.Parallel). The caller it returns true to has
// taken its second model off e.seconds: one utterance that starts
// preempts one second model, not all of them.
func (e *Engine) preempt() bool {
	for {
		s := e.seconds.Load()
		if s == 0 || e.active.Load()+s <= int64(e.cfg.Parallel) {
			return false
		}
		if e.seconds.CompareAndSwap(s, s-1) {
			return true
		}
	}
}

// process decodes a block on the utterance's decoder, and on its second
// if it has one, at the same time: the second model has a CPU of the
// gate's to itself (Engine.seconds), so a client that sends audio faster
// than real time has its backlog decoded in the time one model takes,
// not in the sum of both. A second that fails is dropped: it must not
// fail the utterance.
func (r *recognizer) process(pcm []int16) error {
	second := r.second
	if second == nil {
		return r.d.process(pcm)
	}
	done := make(chan error, 1)
	go func() { done <- second.process(pcm) }()
	err := r.d.process(pcm)
	if <-done != nil {
		r.releaseSecond() // broken: the pool rebuilds it
		r.e.secondFailed.Inc()
	}
	return err
}

// Finish decodes what is left in the resampler, runs the final pass and
// returns the transcript: lower-case words separated by single spaces,
// "" when no speech was recognised.
func (r *recognizer) Finish(ctx context.Context) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.d == nil {
		return "", errClosed
	}
	if r.finished {
		return "", errors.New("sphinx: finish called twice")
	}
	r.finished = true
	if err := ctx.Err(); err != nil {
		r.count(outcomeOf(ctx, err))
		return "", err
	}
	start := time.Now()
	n := len(r.buf)
	r.buf = r.rs.Flush(r.buf)
	r.fold.apply(r.buf[n:])
	if err := r.decode(ctx, true); err != nil {
		r.count(outcomeOf(ctx, err))
		return "", err
	}
	if r.samples == 0 {
		r.count("bad_audio")
		return "", fmt.Errorf("sphinx: no audio in utterance: %w", pipeline.ErrBadAudio)
	}
	began, err := r.acquire(ctx, true)
	if err != nil {
		r.count(outcomeOf(ctx, err))
		return "", fmt.Errorf("sphinx: final pass: %w", err)
	}
	// The final pass is one C call that cannot be interrupted, and on a
	// long utterance it can outlast the STT budget. It runs on its own
	// goroutine so Finish can return at the deadline; the decoder then
	// goes back to the pool when the pass ends (see Close), and the CPU
	// to the gate.
	r.preemptSecond()
	done := make(chan endResult, 1)
	r.ending = done
	go r.e.finalPass(r.d, began, done, r.second != nil)
	var second chan endResult
	if r.second != nil {
		second = make(chan endResult, 1)
		r.endingSecond = second
		go r.e.secondPass(ctx, r.second, second)
	}
	select {
	case <-ctx.Done():
		r.count(outcomeOf(ctx, ctx.Err()))
		return "", fmt.Errorf("sphinx: final pass: %w", ctx.Err())
	case res := <-done:
		r.ending = nil
		if res.err != nil {
			r.count("error")
			return "", res.err
		}
		if second != nil {
			res = r.choose(ctx, res, second, time.Since(began))
		}
		r.e.finalise.Observe(time.Since(start).Seconds())
		r.count("ok")
		r.firstPass = strings.Join(strings.Fields(res.first), " ")
		text := strings.Join(strings.Fields(res.text), " ")
		if text != "" {
			r.alts, r.nbestTook, r.nbestCPU = transcriptFirst(text, res.alts), res.nbestTook, res.nbestCPU
		}
		return text, nil
	}
}

// finalPass ends d's utterance (the final pass, the transcript's
// posterior with withProb, and its N-best list when the engine reports
// one), frees the CPU the pass held since began, and sends the result on
// done. It runs on a goroutine of its own (Finish).
func (e *Engine) finalPass(d *decoder, began time.Time, done chan<- endResult, withProb bool) {
	res := endResult{first: d.hyp()}
	res.text, res.err = d.end()
	if res.err == nil && withProb {
		res.prob = d.prob()
	}
	if n := e.cfg.NBest; res.err == nil && n > 1 {
		t0 := time.Now()
		res.alts, res.nbestCPU = d.nbest(n)
		res.nbestTook = time.Since(t0)
	}
	e.decoding.Add(time.Since(began).Seconds())
	// The CPU before the result: whoever sees the pass end (Finish, or
	// Close returning the decoder) sees the CPU free too.
	e.gate.release()
	done <- res
}

// secondPass is the second model's final pass (finalPass), once the gate
// gives it a CPU of its own: in parallel with the first's when one is
// idle, which is when an utterance has a second model.
func (e *Engine) secondPass(ctx context.Context, d *decoder, done chan<- endResult) {
	if err := e.gate.acquire(ctx, true); err != nil {
		done <- endResult{err: err}
		return
	}
	e.finalPass(d, time.Now(), done, true)
}

// choose returns the second model's result instead of the first's (res)
// when its transcript's posterior per word (perWord) is higher by more
// than Config.SecondMargin. It waits for the second's final pass no longer
// than Config.SecondWait, by default as long as the first's took (took,
// and at least secondGrace).
func (r *recognizer) choose(ctx context.Context, res endResult, second <-chan endResult, took time.Duration) endResult {
	e := r.e
	bound := e.cfg.SecondWait
	if bound <= 0 {
		bound = max(took, secondGrace)
	}
	wait := time.NewTimer(bound)
	defer wait.Stop()
	select {
	case alt := <-second:
		r.endingSecond = nil
		switch {
		case alt.err != nil:
			e.secondFailed.Inc()
		case strings.TrimSpace(alt.text) != "" && perWord(alt) > perWord(res)+e.cfg.SecondMargin:
			e.secondChosen.Inc()
			return alt
		default:
			e.secondKept.Inc()
		}
	case <-wait.C:
		e.secondLate.Inc()
	case <-ctx.Done():
		e.secondLate.Inc()
	}
	return res
}

// perWord is the transcript's posterior (natural log) per word: a whole
// transcript's posterior falls with its length, for both models, so a
// margin on the whole one asked too much of a long utterance and too
// little of a short one. On the tuning set, choosing per word made
// espeak-ng's word errors 917 instead of 1,036 of 2,358 with flite slt
// and people heard as well (docs/benchmarks.md, "The second model's
// choice, per word"). An empty transcript counts as one word.
func perWord(res endResult) float64 {
	return res.prob / float64(max(1, len(strings.Fields(res.text))))
}

// secondGrace is the least time Finish waits for the second model's final
// pass after the first's has ended.
const secondGrace = 20 * time.Millisecond

// count records the utterance's outcome in voiced_stt_utterances_total,
// once: the first way it ended. r.mu is held.
func (r *recognizer) count(outcome string) {
	if r.counted {
		return
	}
	r.counted = true
	r.e.utterances.WithLabelValues(outcome).Inc()
}

// outcomeOf labels a failed utterance for voiced_stt_utterances_total.
func outcomeOf(ctx context.Context, err error) string {
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return "deadline"
	case ctx.Err() != nil:
		return "canceled"
	case errors.Is(err, pipeline.ErrBadAudio):
		return "bad_audio"
	default:
		return "error"
	}
}

type endResult struct {
	text, first string
	prob        float64 // the transcript's posterior (natural log), when asked for
	alts        []pipeline.Hypothesis
	nbestTook   time.Duration
	nbestCPU    time.Duration
	err         error
}

// transcriptFirst returns the N-best list alts with the transcript first.
// The transcript is the best path through the final pass's lattice and
// the N-best list comes from an A* search over the same lattice, whose
// scores round differently, so now and then its order differs: the
// transcript then moves to the front, keeping its score, or, absent from
// the list, takes the best score (and the last alternative drops out, so
// the list is no longer than asked for); no alternative outranks it.
func transcriptFirst(text string, alts []pipeline.Hypothesis) []pipeline.Hypothesis {
	if len(alts) == 0 {
		return nil
	}
	i := slices.IndexFunc(alts, func(h pipeline.Hypothesis) bool { return h.Text == text })
	switch {
	case i == 0:
		return alts
	case i > 0:
		h := alts[i]
		h.Score = max(h.Score, alts[0].Score)
		return append([]pipeline.Hypothesis{h}, slices.Delete(slices.Clone(alts), i, i+1)...)
	}
	return append([]pipeline.Hypothesis{{Text: text, Score: alts[0].Score}}, alts[:len(alts)-1]...)
}

// Alternatives returns, after Finish, the final pass's N-best list
// (Config.NBest distinct hypotheses at most), the transcript first; nil
// when Config.NBest is below 2, before Finish, or when Finish failed or
// recognised nothing.
func (r *recognizer) Alternatives() []pipeline.Hypothesis {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.alts
}

// NBestTime returns, after Finish, how long the N-best search took, in
// wall-clock and in CPU time: the final pass's extra cost for
// Alternatives. The evaluation reports them; on a shared machine the
// wall-clock time includes waiting for a CPU.
func (r *recognizer) NBestTime() (wall, cpu time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.nbestTook, r.nbestCPU
}

// FirstPass returns, after Finish, what the first pass had recognised over
// the whole utterance just before the final pass ("" before Finish or when
// Finish failed). The evaluation compares it with the transcript.
func (r *recognizer) FirstPass() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.firstPass
}

// Close gives the decoder back. An utterance still open is ended by the
// pool in the background, so Close returns at once.
func (r *recognizer) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.d == nil {
		return nil
	}
	d := r.d
	r.d = nil
	r.e.active.Add(-1)
	r.releaseSecond()
	// Closed before any outcome: abandoned mid-stream (its request
	// cancelled, replaced, or its transcript settled from a partial).
	r.count("canceled")
	r.e.giveBack(d, r.ending, nil)
	return nil
}

// releaseSecond gives the second model's decoder back; r.mu is held.
func (r *recognizer) releaseSecond() {
	if d := r.second; d != nil {
		r.second = nil
		r.e.giveBack(d, r.endingSecond, func() { r.e.seconds.Add(-1) })
	}
}

// giveBack returns d to the pool and then calls then, if any. When done
// is not nil, Finish gave up on a final pass still running on d: d goes
// back once the pass ends, and the pool counts it as in use until then,
// so Engine.Close waits for it. A decoder still in an utterance, or
// broken, goes back dirty: the pool resets a dirty one, and a broken
// one's reset fails, so it is rebuilt (decoder.broken). Back clean, it is
// handed out again as it is.
func (e *Engine) giveBack(d *decoder, done <-chan endResult, then func()) {
	release := func() {
		e.pool.Release(d, !d.inUtt && !d.broken)
		if then != nil {
			then()
		}
	}
	if done == nil {
		release()
		return
	}
	go func() {
		<-done // the pass ended: d.inUtt is false
		release()
	}()
}

// channelOf is the channel an utterance of narrowband audio or not is
// heard through before the second model is considered.
func channelOf(narrow bool) channel {
	if narrow {
		return chanNarrow
	}
	return chanWide
}

// detectNarrowband folds the utterance, from its first sample on, when
// window (the start of its speech, the audio the cepstral mean is
// estimated from, nothing decoded yet) has next to nothing above 4.5 kHz
// although it arrived at a higher rate: band-limited audio a client
// upsampled. Folding audio that has a weak upper band by mistake costs
// little: the band mirrored down is that weak. It reports whether it
// found the audio narrowband.
func (r *recognizer) detectNarrowband(window []int16) bool {
	r.detect = false
	if !r.e.band.narrowband(window) {
		return false
	}
	r.fold = newFolder(narrowbandRate, r.e.cfg.NarrowbandFold)
	r.fold.apply(r.buf)
	r.e.foldedSeen.Inc()
	r.narrow = true
	return true
}

// highVoice reports whether the start of the utterance's speech (window,
// nothing decoded yet) has a median pitch of Config.WarpPitch or more, so
// that it is decoded with Config.SpeakerWarp; it counts the utterance in
// voiced_stt_speaker_warp_total by the answer.
func (r *recognizer) highVoice(window []int16) bool {
	hz, _ := medianPitch(window)
	high := hz >= r.e.cfg.WarpPitch
	if high {
		r.e.warped.Inc()
	} else {
		r.e.unwarped.Inc()
	}
	return high
}
