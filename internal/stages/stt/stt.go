// Package stt selects and builds voiced's speech-to-text engine: the
// embedded PocketSphinx engine (package sphinx, the default: offline, no
// key) or a remote OpenAI-compatible transcription service (package
// remote). Both satisfy pipeline.Transcriber.
package stt

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/voiced/voiced/internal/pipeline"
	"github.com/voiced/voiced/internal/stages/stt/remote"
	"github.com/voiced/voiced/internal/stages/stt/sphinx"
)

// Engine names.
const (
	EngineSphinx = "sphinx"
	EngineRemote = "remote"
)

// Config selects and configures the engine. The zero value means the
// embedded engine with its defaults.
type Config struct {
	// Engine is EngineSphinx (default) or EngineRemote.
	Engine string
	Sphinx sphinx.Config
	Remote remote.Config
}

// RegisterFlags registers the -stt.* flags on fs, writing into c.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.Engine, "stt.engine", EngineSphinx, "speech recognition engine: "+strings.Join(Engines(), " or "))
	s := &c.Sphinx
	fs.IntVar(&s.Decoders, "stt.decoders", 0, "embedded engine: decoder pool size, the most utterances in progress (0: 4 per CPU)")
	fs.IntVar(&s.Parallel, "stt.parallel", 0, "embedded engine: decoders computing at once, final passes first (0: one per CPU)")
	fs.StringVar(&s.LM, "stt.lm", sphinx.LMInterp, "embedded engine: language model: interp (domain model interpolated with the general en-us model), general, domain, or file (see -stt.lm-file)")
	fs.StringVar(&s.LMPath, "stt.lm-file", "", "embedded engine: ARPA or binary language model used with -stt.lm=file")
	fs.Float64Var(&s.DomainWeight, "stt.lm-weight", sphinx.DefaultDomainWeight, "embedded engine: weight of the domain model in -stt.lm=interp, in (0, 1)")
	fs.StringVar(&s.Pronunciations, "stt.pronunciations", "", "embedded engine: extra pronunciation dictionary for domain words (CMUdict format)")
	fs.StringVar(&s.CacheDir, "stt.cache-dir", "", "embedded engine: where built domain models are cached (default: user cache dir/voiced/stt)")
	fs.DurationVar(&s.MaxWait, "stt.max-wait", 0, "embedded engine: longest wait for a free decoder before failing with overloaded (0: 250ms)")
	fs.DurationVar(&s.PartialEvery, "stt.partial-every", 0, "embedded engine: audio between partial transcripts (0: 300ms)")
	fs.DurationVar(&s.MaxUtterance, "stt.max-utterance", 0, "longest utterance accepted (0: 60s)")
	fs.StringVar(&s.ModelDir, "stt.model-dir", sphinx.DefaultModelDir, "embedded engine: acoustic model directory")
	fs.StringVar(&s.Acoustic, "stt.acoustic", sphinx.DefaultAcoustic, "embedded engine: acoustic model: "+strings.Join(sphinx.Acoustics, " or ")+
		" (general: -stt.model-dir as it is; adapted: the general en-us model with voiced's embedded adaptation to the domain's text spoken by synthetic voices, better on those voices and worse on others, see docs/benchmarks.md)")
	fs.StringVar(&s.Dict, "stt.dict", sphinx.DefaultDict, "embedded engine: pronunciation dictionary")
	fs.StringVar(&s.GeneralLM, "stt.general-lm", sphinx.DefaultGeneralLM, "embedded engine: general language model")
	fs.DurationVar(&s.CMNWindow, "stt.cmn-window", 0, "embedded engine: audio at the start of an utterance its cepstral mean is estimated from before decoding (0: 1s)")
	fs.Float64Var(&s.NarrowbandFold, "stt.narrowband-fold", 0, "embedded engine: gain of the mirror image of the band below 4 kHz added above it for audio arriving at 8 kHz (telephone, mu-law), which the 16 kHz model otherwise hears with an empty upper band (0: 0.5; negative: none)")
	fs.StringVar(&s.NarrowbandAcoustic, "stt.narrowband-acoustic", sphinx.DefaultNarrowbandAcoustic, "embedded engine: how audio arriving at 8 kHz is heard: "+strings.Join(sphinx.NarrowbandAcoustics, " or ")+
		" (telephone: the general model's means moved by voiced's embedded transform learned from telephone audio, see docs/benchmarks.md \"Telephone audio\"; general: as wideband audio; only with -stt.acoustic=general and the default -stt.model-dir)")
	fs.StringVar(&s.SecondModel, "stt.second-model", sphinx.DefaultSecondModel, "embedded engine: a second acoustic model wideband audio is decoded with too, keeping the transcript the decoder is surer of: "+strings.Join(sphinx.SecondModels, " or ")+
		" (synthetic: the general model's means moved by voiced's embedded transform learned from synthetic voices, see docs/benchmarks.md \"A second model for wideband audio\"; only for utterances that start while the engine is not busy, with a CPU of -stt.parallel and a decoder beyond -stt.busy-above free, and only with -stt.acoustic=general and the default -stt.model-dir)")
	fs.Float64Var(&s.SecondMargin, "stt.second-margin", 0, fmt.Sprintf("embedded engine: how much surer per word (natural log of the transcripts' posterior probabilities, each divided by its number of words) the second model must be for its transcript to be kept (0: %g; negative: a less sure second model may win)", sphinx.DefaultSecondMargin))
	fs.Float64Var(&s.SpeakerWarp, "stt.speaker-warp", 0, fmt.Sprintf("embedded engine: frequency warp of a high voice, whose features are computed with frequencies divided by it (vocal tract length normalisation; 0: %g; negative or 1: none)", sphinx.DefaultSpeakerWarp))
	fs.Float64Var(&s.WarpPitch, "stt.warp-pitch", 0, fmt.Sprintf("embedded engine: median pitch in Hz over an utterance's first -stt.cmn-window from which -stt.speaker-warp applies (0: %g)", sphinx.DefaultWarpPitch))
	fs.BoolVar(&s.KeepCMN, "stt.keep-cmn", false, "embedded engine: carry the cepstral mean from a decoder's previous utterance instead (PocketSphinx's own behaviour)")
	fs.Func("stt.sphinx-args", "embedded engine: extra PocketSphinx options, e.g. \"-lw 8 -maxhmmpf 3000\"", func(v string) error {
		s.Args = strings.Fields(v)
		return nil
	})
	fs.BoolVar(&s.NoFwdflat, "stt.no-fwdflat", false, "embedded engine: skip the second decoding pass (faster finalisation, a little less accurate)")
	fs.IntVar(&s.NBest, "stt.nbest", 0, "embedded engine: distinct final-pass hypotheses reported per utterance for the intent stage (0: as many as -intent.alternatives weighs, none when that is 1; 1: none)")
	fs.StringVar(&s.Search, "stt.search", sphinx.DefaultSearch, "embedded engine: decoder search: "+strings.Join(sphinx.Searches, ", ")+
		" (full: PocketSphinx's own pruning, both passes; fast: tighter pruning, both passes; quick: fast without the second pass; see docs/benchmarks.md); -stt.sphinx-args overrides any")
	fs.StringVar(&s.BusySearch, "stt.busy-search", sphinx.DefaultBusySearch, "embedded engine: decoder search of an utterance that starts while more than -stt.busy-above are in progress (the same as -stt.search: one search whatever the load)")
	fs.IntVar(&s.BusyAbove, "stt.busy-above", 0, "embedded engine: utterances in progress above which new ones get -stt.busy-search (0: 1 per CPU)")
	r := &c.Remote
	fs.StringVar(&r.BaseURL, "stt.remote.url", "", "remote engine: OpenAI-compatible API base URL including /v1")
	fs.StringVar(&r.Model, "stt.remote.model", "whisper-1", "remote engine: model name")
	fs.StringVar(&r.APIKeyEnv, "stt.remote.key-env", "VOICED_STT_API_KEY", "remote engine: environment variable holding the API key")
	fs.StringVar(&r.Language, "stt.remote.language", "en", "remote engine: language hint (ISO-639-1)")
}

// Engine is the selected speech recogniser.
type Engine struct {
	pipeline.Transcriber
	name  string
	ready func() bool
	close func() error
}

type constructor func(ctx context.Context, cfg Config, corpus []string, log *slog.Logger, reg prometheus.Registerer) (*Engine, error)

var engines = map[string]constructor{
	EngineSphinx: func(ctx context.Context, cfg Config, corpus []string, log *slog.Logger, reg prometheus.Registerer) (*Engine, error) {
		e, err := sphinx.New(ctx, cfg.Sphinx, corpus, log, reg)
		if err != nil {
			return nil, err
		}
		return &Engine{Transcriber: e, name: EngineSphinx, ready: e.Ready, close: e.Close}, nil
	},
	EngineRemote: func(ctx context.Context, cfg Config, corpus []string, log *slog.Logger, reg prometheus.Registerer) (*Engine, error) {
		rc := cfg.Remote
		if rc.MaxUtterance == 0 {
			// -stt.max-utterance is both engines' flag; it is registered
			// into the embedded engine's Config.
			rc.MaxUtterance = cfg.Sphinx.MaxUtterance
		}
		e, err := remote.New(rc, nil, log, reg)
		if err != nil {
			return nil, err
		}
		return &Engine{Transcriber: e, name: EngineRemote, ready: e.Ready, close: e.Close}, nil
	},
}

// Validate checks the engine's name and the embedded engine's named
// settings, naming their flags. New checks them too, but only once
// voiced has trained its classifier and indexed its knowledge base: a
// misspelt value was reported a dozen seconds after the start.
func (c Config) Validate() error {
	name := cmp.Or(c.Engine, EngineSphinx)
	if _, ok := engines[name]; !ok {
		return fmt.Errorf("-stt.engine %q: want %s", c.Engine, strings.Join(Engines(), " or "))
	}
	// Both engines' flag.
	if c.Sphinx.MaxUtterance < 0 {
		return fmt.Errorf("-stt.max-utterance %v: must not be negative (0: the default)", c.Sphinx.MaxUtterance)
	}
	if name == EngineRemote {
		if err := validateRemoteURL(c.Remote.BaseURL); err != nil {
			return err
		}
	}
	if name != EngineSphinx {
		return nil
	}
	if err := validateSphinxNumbers(c.Sphinx); err != nil {
		return err
	}
	if err := validateSphinxModels(c.Sphinx); err != nil {
		return err
	}
	return validateSphinxFiles(c.Sphinx)
}

// validateRemoteURL checks -stt.remote.url. New checks the URL too, but
// the remote engine is built last, after every other engine's warm-up.
// The URL is not quoted: it can carry credentials.
func validateRemoteURL(baseURL string) error {
	u, err := url.Parse(baseURL)
	switch {
	case baseURL == "":
		return errors.New("-stt.engine remote needs -stt.remote.url")
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return errors.New("-stt.remote.url: want an absolute http:// or https:// URL")
	}
	return nil
}

// validateSphinxNumbers checks the embedded engine's counts, durations and
// floating-point settings. sphinx.New refuses these too, but after the
// warm-up of every engine before it, and with no flag named.
func validateSphinxNumbers(s sphinx.Config) error {
	for _, f := range []struct {
		flag string
		v    int
	}{{"stt.decoders", s.Decoders}, {"stt.parallel", s.Parallel}, {"stt.busy-above", s.BusyAbove}, {"stt.nbest", s.NBest}} {
		if f.v < 0 {
			return fmt.Errorf("-%s %d: must not be negative (0: the default)", f.flag, f.v)
		}
	}
	if s.NBest > sphinx.MaxNBest {
		return fmt.Errorf("-stt.nbest %d: want at most %d", s.NBest, sphinx.MaxNBest)
	}
	for _, f := range []struct {
		flag string
		v    time.Duration
	}{{"stt.max-wait", s.MaxWait}, {"stt.partial-every", s.PartialEvery}, {"stt.cmn-window", s.CMNWindow}} {
		if f.v < 0 {
			return fmt.Errorf("-%s %v: must not be negative (0: the default)", f.flag, f.v)
		}
	}
	for _, f := range []struct {
		flag string
		v    float64
	}{{"stt.narrowband-fold", s.NarrowbandFold}, {"stt.speaker-warp", s.SpeakerWarp}, {"stt.warp-pitch", s.WarpPitch}, {"stt.second-margin", s.SecondMargin}} {
		// NaN passes every range check: a NaN fold silenced every
		// call's audio.
		if math.IsNaN(f.v) || math.IsInf(f.v, 0) {
			return fmt.Errorf("-%s %v: want a finite number", f.flag, f.v)
		}
	}
	return nil
}

// validateSphinxModels checks the embedded engine's named settings (language
// and acoustic models, searches) and what the language model needs: a
// weight for interp, a file for file. A misspelt name would otherwise be
// reported by sphinx.New, a dozen seconds after the start.
func validateSphinxModels(s sphinx.Config) error {
	for _, f := range []struct {
		flag, v string
		want    []string
	}{
		{"stt.lm", s.LM, []string{sphinx.LMInterp, sphinx.LMGeneral, sphinx.LMDomain, sphinx.LMFile}},
		{"stt.acoustic", s.Acoustic, sphinx.Acoustics},
		{"stt.narrowband-acoustic", s.NarrowbandAcoustic, sphinx.NarrowbandAcoustics},
		{"stt.second-model", s.SecondModel, sphinx.SecondModels},
		{"stt.search", s.Search, sphinx.Searches},
		{"stt.busy-search", s.BusySearch, sphinx.Searches},
	} {
		if f.v != "" && !slices.Contains(f.want, f.v) { // "": the default
			return fmt.Errorf("-%s %q: want %s", f.flag, f.v, strings.Join(f.want, ", "))
		}
	}
	if w := s.DomainWeight; w != 0 && !(w > 0 && w < 1) { // 0: the default; NaN fails too
		return fmt.Errorf("-stt.lm-weight %v: want a number between 0 and 1, both excluded", w)
	}
	if s.LM == sphinx.LMFile && s.LMPath == "" {
		return errors.New("-stt.lm file needs -stt.lm-file")
	}
	return nil
}

// validateSphinxFiles checks that the files the flags name exist, and are files
// where a file is wanted. A default that is missing is left to
// sphinx.New, which says which Debian package to install.
func validateSphinxFiles(s sphinx.Config) error {
	for _, f := range []struct{ flag, v, def, in string }{
		{"stt.model-dir", s.ModelDir, sphinx.DefaultModelDir, "mdef"},
		{"stt.dict", s.Dict, sphinx.DefaultDict, ""},
		{"stt.general-lm", s.GeneralLM, sphinx.DefaultGeneralLM, ""},
		{"stt.lm-file", s.LMPath, "", ""},
		{"stt.pronunciations", s.Pronunciations, "", ""},
	} {
		if f.v == "" || filepath.Clean(f.v) == f.def {
			continue
		}
		fi, err := os.Stat(filepath.Join(f.v, f.in))
		if err != nil {
			return fmt.Errorf("-%s: %w", f.flag, err)
		}
		if f.in == "" && fi.IsDir() {
			return fmt.Errorf("-%s %s: is a directory, not a file", f.flag, f.v)
		}
	}
	return nil
}

// Engines lists the engine names.
func Engines() []string { return slices.Sorted(maps.Keys(engines)) }

// New builds the configured engine. For the embedded engine it builds the
// domain language model from corpus (the domain's intent examples and
// article text) and warms the decoder pool, returning only when the engine
// is ready.
func New(ctx context.Context, cfg Config, corpus []string, log *slog.Logger, reg prometheus.Registerer) (*Engine, error) {
	name := cfg.Engine
	if name == "" {
		name = EngineSphinx
	}
	mk, ok := engines[name]
	if !ok {
		return nil, fmt.Errorf("stt: unknown engine %q (want %s)", name, strings.Join(Engines(), " or "))
	}
	e, err := mk(ctx, cfg, corpus, log, reg)
	if err != nil {
		return nil, fmt.Errorf("stt: %s engine: %w", name, err)
	}
	return e, nil
}

// Name is the engine's name.
func (e *Engine) Name() string { return e.name }

// Ready reports whether the engine takes utterances.
func (e *Engine) Ready() bool { return e.ready() }

// Close frees the engine (for the embedded engine, after the recognisers
// still open are closed, waiting up to 10 s).
func (e *Engine) Close() error { return e.close() }
