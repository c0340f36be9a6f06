package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/voiced/voiced/internal/domain"
	"github.com/voiced/voiced/internal/pipeline"
	"github.com/voiced/voiced/internal/stages/intent"
	"github.com/voiced/voiced/internal/stages/llm"
	"github.com/voiced/voiced/internal/stages/retrieval"
	"github.com/voiced/voiced/internal/stages/sim"
	"github.com/voiced/voiced/internal/stages/stt"
	"github.com/voiced/voiced/internal/stages/stt/lm"
	"github.com/voiced/voiced/internal/stages/stt/sphinx"
	"github.com/voiced/voiced/internal/stages/tts"
)

// engineFlags configures the real engines.
type engineFlags struct {
	domainDir string
	stt       stt.Config
	intent    intent.Config
	retrieval retrieval.Config
	llm       llm.Config
	tts       tts.Config
	// speechIgnored are the -tts.* flags given with -tts.engine off.
	speechIgnored []string
}

func (e *engineFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&e.domainDir, "domain", "", "domain `folder` (intents, knowledge base; see docs/domain.md); default: the embedded help-desk sample")
	e.stt.RegisterFlags(fs)
	e.intent.RegisterFlags(fs)
	e.retrieval.RegisterFlags(fs)
	e.llm.RegisterFlags(fs)
	e.tts.RegisterFlags(fs)
}

// speechOff is the -tts.engine value that turns speech off.
const speechOff = "off"

// buildSpeech builds and warms the speech synthesiser, or returns nil
// (speech off, logged) when it is turned off or unavailable (a build
// without cgo has no embedded engine).
func buildSpeech(ctx context.Context, cfg *config, log *slog.Logger, reg prometheus.Registerer) (*tts.Engine, error) {
	tc := cfg.engines.tts
	if tc.Engine == speechOff {
		if ig := cfg.engines.speechIgnored; len(ig) > 0 {
			log.Warn("speech off (-tts.engine off): ignoring the speech flags given", "flags", ig)
		} else {
			log.Info("speech off (-tts.engine off)")
		}
		return nil, nil
	}
	eng, err := tts.New(tc, log, reg)
	if errors.Is(err, tts.ErrUnavailable) {
		log.Warn("speech off: no speech synthesiser in this build", "err", err)
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := eng.Warm(wctx); err != nil {
		// The remote engine falls back per sentence: not fatal.
		log.Warn("warming the speech engine", "engine", eng.Name(), "err", err)
	}
	log.Info("speech ready", "engine", eng.Name(), "voices", eng.Voices())
	return eng, nil
}

var _ intent.Lexicon = (*lm.Lexicon)(nil)

// intentLexicon is what the intent classifier looks up the sounds of
// words in: the recogniser's dictionary with the pronunciations it adds
// over it (the domain's, or -stt.pronunciations). Without them the
// classifier does without phone features, and the log says so.
func intentLexicon(sc sphinx.Config, log *slog.Logger) intent.Lexicon {
	var lex *lm.Lexicon
	prons, err := sc.ReadPronunciations()
	if err == nil {
		lex, err = lm.ReadLexicon(cmp.Or(sc.Dict, lm.DefaultDictionary), prons)
	}
	if err != nil {
		log.Warn("intent without phone features: its pronunciation lexicon could not be read", "err", err)
		return nil
	}
	return lex
}

func (e *engineFlags) fromEnv(getenv func(string) string) { e.llm.FromEnv(getenv) }

// buildStages builds the pipeline's engines, and a function that releases
// them. The embedded engines need no network and no key.
func buildStages(ctx context.Context, cfg *config, log *slog.Logger, reg prometheus.Registerer) (pipeline.Stages, func(), error) {
	if cfg.stages == "sim" {
		log.Warn("SIMULATION MODE: every stage is simulated with scripted latencies and fake answers; for load tests only")
		s := sim.New(cfg.sim)
		return pipeline.Stages{STT: s.STT, Intent: s.Intent, Retrieval: s.Retrieval, LLM: s.LLM}, func() {}, nil
	}
	e := &cfg.engines
	var closers []func() error
	closeAll := func() {
		for i := len(closers) - 1; i >= 0; i-- {
			if err := closers[i](); err != nil {
				log.Warn("closing engine", "err", err)
			}
		}
	}
	fail := func(err error) (pipeline.Stages, func(), error) {
		closeAll()
		return pipeline.Stages{}, nil, err
	}

	start := time.Now()
	dom, err := domain.LoadOrDefault(e.domainDir)
	if err != nil {
		return fail(err)
	}
	log.Info("domain loaded", "domain", dom.Name, "intents", len(dom.Intents), "articles", len(dom.Articles))
	if few := thinIntents(dom); len(few) > 0 {
		log.Warn("intents with few examples: the classifier is overconfident on them and rarely says out_of_scope; docs/domain.md recommends 15 or more each, and off-topic examples under out_of_scope",
			"intents", few)
	}

	sttCfg := e.stt
	if sttCfg.Sphinx.Pronunciations == "" {
		// The domain's own pronunciations: a file on disk, or, for the
		// embedded domain, its content.
		sttCfg.Sphinx.Pronunciations, sttCfg.Sphinx.PronunciationsData, err = dom.PronunciationsSource()
		if err != nil {
			return fail(err)
		}
	}
	icfg := e.intent
	icfg.Known = dom.KnownText()
	icfg.Classes = dom.Classes
	icfg.Lexicon = intentLexicon(sttCfg.Sphinx, log)
	cls, err := intent.New(ctx, dom.Intents, icfg)
	if err != nil {
		return fail(err) // the classifier's errors name it
	}
	idx, err := retrieval.Open(ctx, e.retrieval, dom.Articles)
	if err != nil {
		return fail(err) // the index's errors name it
	}
	closers = append(closers, idx.Close)
	log.Info("knowledge base indexed", "passages", idx.Len())

	gen, err := llm.New(e.llm, dom, log, reg)
	if err != nil {
		return fail(fmt.Errorf("llm: %w", err))
	}
	closers = append(closers, gen.Close)
	wctx, cancelW := context.WithTimeout(ctx, 3*time.Second)
	gen.Warm(wctx)
	cancelW()
	log.Info("answer providers", "chain", gen.Providers())

	if n := cls.Config().Alternatives; sttCfg.Sphinx.NBest == 0 && n > 1 {
		// The recogniser reports as many hypotheses as the classifier
		// weighs.
		sttCfg.Sphinx.NBest = n
	}
	eng, err := stt.New(ctx, sttCfg, dom.CorpusSentences(), log, reg)
	if err != nil {
		if errors.Is(err, pipeline.ErrUnavailable) {
			return fail(fmt.Errorf("%w\n(to run without it for a load test, use -stages=sim)", err))
		}
		return fail(err)
	}
	closers = append(closers, eng.Close)
	log.Info("engines ready", "stt", eng.Name(), "took", time.Since(start).Round(time.Millisecond))

	return pipeline.Stages{STT: eng, Intent: cls, Retrieval: idx, LLM: gen, Templates: dom}, closeAll, nil
}

// minExamples is the number of examples per intent under which the
// classifier, trained on a handful of sentences, is overconfident: an
// off-topic question scores near 1 for some intent, so the out_of_scope
// threshold seldom applies (docs/domain.md).
const minExamples = 15

// thinIntents names the intents trained on fewer than minExamples
// examples (an intent with none is answered only by its response).
func thinIntents(dom *domain.Domain) []string {
	var few []string
	for _, in := range dom.Intents {
		if n := len(in.Examples); n > 0 && n < minExamples {
			few = append(few, in.Name)
		}
	}
	return few
}
