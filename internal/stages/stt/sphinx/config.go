// Package sphinx is voiced's embedded, offline speech recogniser: CMU
// PocketSphinx (Debian 12's libpocketsphinx-dev, through cgo) with the
// general en-us acoustic model, dictionary and language model from the
// pocketsphinx-en-us package, and a trigram model built at startup from the
// domain's text and interpolated with the general one.
//
// Decoders are expensive (about half a second to build and about 100 MB
// each), so the engine keeps a fixed pool of them, built before New returns,
// and resets and reuses them per utterance. Audio is decoded as it arrives,
// one frame per cgo call, so that after the speech ends only the final pass
// is left and a cancelled utterance gives its decoder back within a frame.
//
// Built without cgo (CGO_ENABLED=0) or with the nosphinx build tag, the
// package still compiles but New reports the engine unavailable.
package sphinx

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/voiced/voiced/internal/pipeline"
)

// Where Debian's pocketsphinx-en-us package installs the model.
const (
	DefaultModelDir  = "/usr/share/pocketsphinx/model/en-us/en-us"
	DefaultDict      = "/usr/share/pocketsphinx/model/en-us/cmudict-en-us.dict"
	DefaultGeneralLM = "/usr/share/pocketsphinx/model/en-us/en-us.lm.bin"
)

// Language model modes.
const (
	LMInterp  = "interp"  // domain model interpolated with the general one (default)
	LMGeneral = "general" // the general en-us model alone
	LMDomain  = "domain"  // the domain model alone
	LMFile    = "file"    // a user-supplied ARPA or binary model (LMPath)
)

// Search settings: how hard the decoder searches.
const (
	// SearchFull is PocketSphinx's own defaults (both passes, its
	// pruning): the default.
	SearchFull = "full"
	// SearchFast is both passes with the tighter pruning of FastArgs:
	// about half the CPU per stream, at a cost in words on flite's kal
	// voice (docs/benchmarks.md).
	SearchFast = "fast"
)

// DefaultSearch is the search setting of the zero Config. It stays
// SearchFull: SearchFast meets the word error targets on the evaluation
// set, and sustains 6 real-time streams on a 2-core machine where
// SearchFull sustains 4, but not the 8 that were asked for (its
// finalisation p99 at 8 streams measured 156-271 ms over four runs), and
// it costs kal's word error rate 13.7% -> 20.5% (docs/benchmarks.md).
const DefaultSearch = SearchFull

// FastArgs are the PocketSphinx options SearchFast adds, chosen with
// cmd/evalstt on the tuning set (sttest/tuning.tsv), not on the evaluation
// set: at most 3000 active HMMs and 10 word exits per frame in the first
// pass (PocketSphinx: 30000 and unlimited), and a second pass that
// considers word ends within 2 frames and word starts within 10 frames of
// the first pass's (PocketSphinx: 4 and 25). The first pass's per-frame
// work is most of a stream's CPU; on the tuning set cutting it left slt's
// errors the same and kal's fewer. Tighter beams, -ds 2, -topn 2 or 3, a
// narrower second-pass beam, and no second pass or best-path search all
// cost more words on the tuning set.
var FastArgs = []string{"-maxhmmpf", "3000", "-maxwpf", "10", "-fwdflatefwid", "2", "-fwdflatsfwin", "10"}

// DefaultDomainWeight is the domain model's interpolation weight, chosen by
// measurement (cmd/evalstt; see docs/benchmarks.md).
const DefaultDomainWeight = 0.5

// Packages is the Debian packages the engine needs, for error messages.
const Packages = "libpocketsphinx-dev pocketsphinx-en-us pkg-config"

// ErrNotInstalled is wrapped by New when the model files are missing.
var ErrNotInstalled = errors.New("pocketsphinx model files not found (install the Debian packages: " + Packages + ")")

// Config configures the engine. The zero value means the defaults noted on
// each field.
type Config struct {
	ModelDir  string // acoustic model directory; default DefaultModelDir
	Dict      string // pronunciation dictionary; default DefaultDict
	GeneralLM string // general language model; default DefaultGeneralLM

	// LM selects the language model: LMInterp (default), LMGeneral,
	// LMDomain or LMFile.
	LM string
	// LMPath is the model file for LMFile.
	LMPath string
	// DomainWeight is the domain model's weight in LMInterp, in (0, 1);
	// default DefaultDomainWeight.
	DomainWeight float64
	// Order of the domain n-gram model; default 3.
	Order int
	// Pronunciations is an optional dictionary file (the dictionary's
	// format: "word  PH O N E S" per line) adding words the domain uses.
	Pronunciations string
	// PronunciationsData is the same in memory, for a domain that is not
	// on disk (an embedded one); used when Pronunciations is empty.
	PronunciationsData []byte
	// CacheDir holds built domain models, named by content hash; default
	// the user cache directory's voiced/stt.
	CacheDir string

	// Decoders is the pool size; default 2 per CPU: the benchmark
	// (docs/benchmarks.md) shows a 2-core machine keeps finalisation p99
	// under 200-300 ms at 4 real-time streams and not at 6, and a request
	// that cannot have a decoder is better refused with overloaded at once
	// than accepted onto a CPU that cannot keep up.
	Decoders int
	// MaxWait bounds how long an utterance waits for a free decoder
	// before failing with overloaded; default 250 ms.
	MaxWait time.Duration
	// PartialEvery is how much audio passes between partial hypotheses;
	// default 300 ms.
	PartialEvery time.Duration
	// MaxUtterance is the longest utterance accepted; longer audio fails
	// with bad audio. Default 60 s.
	MaxUtterance time.Duration
	// CMNWindow is how much audio at the start of each utterance the
	// cepstral mean is estimated from before decoding begins; default
	// 500 ms. PocketSphinx normalises each utterance with a mean it only
	// updates between utterances. Left alone, a pooled decoder would use
	// the mean of whoever spoke to it last (so a transcript would depend on
	// another caller's voice and line), or on a fresh decoder the model's
	// built-in mean, which measured here is badly off for band-limited
	// voices (95% word errors on flite's 8 kHz kal voice with the general
	// model). Estimating it from the utterance itself delays only the
	// first partial transcript, by this window.
	CMNWindow time.Duration
	// KeepCMN instead carries the mean over from the decoder's previous
	// utterance, as PocketSphinx does by itself.
	KeepCMN bool
	// Args are extra PocketSphinx options as name/value pairs, e.g.
	// {"-lw", "8"}, for tuning; see pocketsphinx_continuous -help.
	Args []string
	// NoFwdflat skips PocketSphinx's second (flat-lexicon) pass, which
	// makes finalisation faster at some cost in accuracy.
	NoFwdflat bool
	// Search is SearchFull or SearchFast; default DefaultSearch. Args
	// override its options of the same name.
	Search string
}

func (c Config) withDefaults() Config {
	if c.ModelDir == "" {
		c.ModelDir = DefaultModelDir
	}
	if c.Dict == "" {
		c.Dict = DefaultDict
	}
	if c.GeneralLM == "" {
		c.GeneralLM = DefaultGeneralLM
	}
	if c.LM == "" {
		c.LM = LMInterp
	}
	if c.DomainWeight == 0 {
		c.DomainWeight = DefaultDomainWeight
	}
	if c.Order == 0 {
		c.Order = 3
	}
	if c.CacheDir == "" {
		if d, err := os.UserCacheDir(); err == nil {
			c.CacheDir = filepath.Join(d, "voiced", "stt")
		} else {
			c.CacheDir = filepath.Join(os.TempDir(), "voiced-stt-cache")
		}
	}
	if c.Decoders == 0 {
		c.Decoders = 2 * runtime.NumCPU()
	}
	if c.MaxWait == 0 {
		c.MaxWait = 250 * time.Millisecond
	}
	if c.PartialEvery == 0 {
		c.PartialEvery = 300 * time.Millisecond
	}
	if c.MaxUtterance == 0 {
		c.MaxUtterance = 60 * time.Second
	}
	if c.CMNWindow == 0 {
		c.CMNWindow = time.Second
	}
	if c.Search == "" {
		c.Search = DefaultSearch
	}
	return c
}

// decoderArgs is the PocketSphinx command line for a decoder: the model,
// then the search setting's options, then Args, a later value of an
// option replacing an earlier one (in place, so each option appears once).
func (c Config) decoderArgs() []string {
	args := []string{
		"-hmm", c.ModelDir,
		"-dict", c.Dict,
		"-samprate", "16000",
	}
	var more []string
	if c.Search == SearchFast {
		more = append(more, FastArgs...)
	}
	if c.NoFwdflat {
		more = append(more, "-fwdflat", "no")
	}
	more = append(more, c.Args...)
	at := map[string]int{}
	for i := 0; i < len(args); i += 2 {
		at[args[i]] = i
	}
	for i := 0; i+1 < len(more); i += 2 {
		if j, ok := at[more[i]]; ok {
			args[j+1] = more[i+1]
			continue
		}
		at[more[i]] = len(args)
		args = append(args, more[i], more[i+1])
	}
	return args
}

// validate checks the configuration and that the files it names exist.
func (c Config) validate() error {
	switch c.LM {
	case LMInterp, LMGeneral, LMDomain:
	case LMFile:
		if c.LMPath == "" {
			return errors.New("sphinx: LM mode \"file\" needs a model path")
		}
	default:
		return fmt.Errorf("sphinx: unknown LM mode %q (want %s, %s, %s or %s)", c.LM, LMInterp, LMGeneral, LMDomain, LMFile)
	}
	if c.Search != SearchFast && c.Search != SearchFull {
		return fmt.Errorf("sphinx: unknown search setting %q (want %s or %s)", c.Search, SearchFull, SearchFast)
	}
	if c.DomainWeight <= 0 || c.DomainWeight >= 1 {
		return fmt.Errorf("sphinx: domain weight %v out of range (0, 1)", c.DomainWeight)
	}
	if c.Decoders < 1 {
		return fmt.Errorf("sphinx: %d decoders, want >= 1", c.Decoders)
	}
	if len(c.Args)%2 != 0 {
		return fmt.Errorf("sphinx: extra options %q are not name/value pairs", c.Args)
	}
	for i := 0; i < len(c.Args); i += 2 {
		if !strings.HasPrefix(c.Args[i], "-") {
			return fmt.Errorf("sphinx: extra option name %q does not start with '-'", c.Args[i])
		}
	}
	if c.Order < 1 || c.Order > 5 {
		return fmt.Errorf("sphinx: n-gram order %d out of range 1..5", c.Order)
	}
	for _, f := range []string{filepath.Join(c.ModelDir, "mdef"), c.Dict} {
		if _, err := os.Stat(f); err != nil {
			return fmt.Errorf("sphinx: %s: %w: %w", f, ErrNotInstalled, pipeline.ErrUnavailable)
		}
	}
	needGeneral := c.LM == LMInterp || c.LM == LMGeneral
	if _, err := os.Stat(c.GeneralLM); needGeneral && err != nil {
		return fmt.Errorf("sphinx: general language model %s: %w: %w", c.GeneralLM, ErrNotInstalled, pipeline.ErrUnavailable)
	}
	if c.LM == LMFile {
		if _, err := os.Stat(c.LMPath); err != nil {
			return fmt.Errorf("sphinx: language model: %w", err)
		}
	}
	if c.Pronunciations != "" {
		if _, err := os.Stat(c.Pronunciations); err != nil {
			return fmt.Errorf("sphinx: pronunciations: %w", err)
		}
	}
	return nil
}

// SupportedRates are the input sample rates Start accepts; audio is
// resampled to 16 kHz.
var SupportedRates = []int{8000, 11025, 12000, 16000, 22050, 24000, 32000, 44100, 48000}

// modelRate is the acoustic model's sample rate.
const modelRate = 16000
