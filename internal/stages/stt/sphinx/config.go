// Package sphinx is voiced's embedded, offline speech recogniser: CMU
// PocketSphinx (Debian 12's libpocketsphinx-dev, through cgo) with the
// general en-us acoustic model, dictionary and language model from the
// pocketsphinx-en-us package, and a trigram model built at startup from the
// domain's text and interpolated with the general one. An acoustic model
// adapted to synthetic voices speaking the domain's text is embedded
// (acoustic.go) and selectable; it is not the default. Audio that arrives
// at 8 kHz is folded above 4 kHz (narrowband.go) and heard with the
// model's means moved by a transform learned from telephone audio
// (acoustic.go, Config.NarrowbandAcoustic). Wideband audio is decoded by a
// second model too while the engine is idle, the means moved by a
// transform learned from synthetic voices, and the transcript the
// decoder is surer of is kept (Config.SecondModel).
//
// Decoders are expensive (about a third of a second to build and about 130
// MB each), so the engine keeps a fixed pool of them, built before New
// returns, and resets and reuses them per utterance. Audio is decoded as it
// arrives, one 40 ms block per cgo call, so that after the speech ends only
// the final pass is left and a cancelled utterance gives its decoder back
// within a block.
//
// Two things keep finalisation fast when many streams share few CPUs. A
// gate lets one decoder per CPU compute at a time and serves final passes
// first (gate.go). And each decoder holds two searches: an utterance that
// starts while the engine is busy gets the one without a second pass, which
// otherwise costs up to about 170 ms of a CPU when a long utterance ends,
// and the pipeline is told (pipeline.Degrader).
//
// With Config.NBest the final pass also reports the next best
// hypotheses (pipeline.Alternator), from PocketSphinx's A* search over its
// lattice, for an intent classifier that weighs them (voiced asks for as
// many as its classifier weighs; docs/benchmarks.md).
//
// Built without cgo (CGO_ENABLED=0) or with the nosphinx build tag, the
// package still compiles but New reports the engine unavailable.
package sphinx

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/voiced/voiced/internal/pipeline"
	"github.com/voiced/voiced/internal/stages/stt/lm"
)

// Where Debian's pocketsphinx-en-us package installs the model.
const (
	DefaultModelDir  = "/usr/share/pocketsphinx/model/en-us/en-us"
	DefaultDict      = lm.DefaultDictionary
	DefaultGeneralLM = "/usr/share/pocketsphinx/model/en-us/en-us.lm.bin"
)

// Language model modes.
const (
	LMInterp  = "interp"  // domain model interpolated with the general one (default)
	LMGeneral = "general" // the general en-us model alone
	LMDomain  = "domain"  // the domain model alone
	LMFile    = "file"    // a user-supplied ARPA or binary model (LMPath)
)

// Search settings: how hard the decoder searches. Each sets the same
// PocketSphinx options (searchKeys), so that one decoder can hold a search
// of each setting and switch between them per utterance.
const (
	// SearchFull is PocketSphinx's own defaults: both passes, its pruning.
	SearchFull = "full"
	// SearchFast is both passes with tighter pruning (FastArgs): about
	// half the CPU per stream of SearchFull, the default.
	SearchFast = "fast"
	// SearchQuick is SearchFast's first pass alone: no second pass, so an
	// utterance is final 10-20 ms after its audio ends instead of 50-200
	// ms, for a few more word errors. The default when busy.
	SearchQuick = "quick"
)

// Searches are the search settings, for validation and help.
var Searches = []string{SearchFull, SearchFast, SearchQuick}

// DefaultSearch is the search of the zero Config: SearchFast meets the
// word error targets on the evaluation set (slt 8.5%, kal 20.5%), and its
// finalisation p99 stays under 200 ms up to 4 real-time streams on a
// 2-core machine, where SearchFull's second pass (more accurate on kal,
// 13.7%) exceeds 200 ms on long utterances even with one stream
// (docs/benchmarks.md).
const DefaultSearch = SearchFast

// DefaultBusySearch is the search an utterance gets when it starts on a
// busy engine (Config.BusyAbove): with SearchQuick a 2-core machine keeps
// finalisation p99 far under 200 ms at 8 real-time streams, where a
// second pass for everyone would not.
const DefaultBusySearch = SearchQuick

// FastArgs are the PocketSphinx options of SearchFast, chosen with
// cmd/evalstt on the tuning set (sttest/tuning.tsv), not on the evaluation
// set: at most 3000 active HMMs and 10 word exits per frame in the first
// pass (PocketSphinx: 30000 and unlimited), and a second pass that
// considers word ends within 2 frames and word starts within 10 frames of
// the first pass's (PocketSphinx: 4 and 25). The first pass's per-frame
// work is most of a stream's CPU; on the tuning set cutting it left slt's
// errors the same and kal's fewer. Tighter beams, -ds 2, -topn 2 or 3, a
// narrower second-pass beam, and no second pass or best-path search all
// cost more words on the tuning set.
var FastArgs = []string{"-maxhmmpf", "3000", "-maxwpf", "10", "-fwdflatefwid", "2", "-fwdflatsfwin", "10", "-fwdflat", "yes"}

// fullArgs are PocketSphinx's own values of the options FastArgs sets.
var fullArgs = []string{"-maxhmmpf", "30000", "-maxwpf", "-1", "-fwdflatefwid", "4", "-fwdflatsfwin", "25", "-fwdflat", "yes"}

// searchPreset is a search setting's options.
func searchPreset(search string) []string {
	switch search {
	case SearchFast:
		return FastArgs
	case SearchQuick:
		return mergeArgs(FastArgs, []string{"-fwdflat", "no"})
	default:
		return fullArgs
	}
}

// DefaultDomainWeight is the domain model's interpolation weight, chosen by
// measurement (cmd/evalstt; see docs/benchmarks.md).
const DefaultDomainWeight = 0.5

// MaxNBest bounds Config.NBest: the A* search's cost grows with the
// hypotheses asked for.
const MaxNBest = 20

// Packages is the Debian packages the engine needs, for error messages.
const Packages = "libpocketsphinx-dev pocketsphinx-en-us pkg-config"

// ErrNotInstalled is wrapped by New when the model files are missing.
var ErrNotInstalled = errors.New("pocketsphinx model files not found (install the Debian packages: " + Packages + ")")

// Config configures the engine. The zero value means the defaults noted on
// each field.
type Config struct {
	ModelDir string // acoustic model directory; default DefaultModelDir
	// Acoustic is AcousticGeneral (the model in ModelDir as it is; the
	// default, DefaultAcoustic) or AcousticAdapted (the general model with
	// voiced's embedded adaptation loaded over it; only with the default
	// ModelDir, the model it was estimated from).
	Acoustic  string
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

	// Decoders is the pool size, the most utterances in progress; default
	// 4 per CPU. The benchmark (docs/benchmarks.md) shows a 2-core machine
	// keeping finalisation p99 under 200 ms at 12 real-time streams (most
	// of them with BusySearch), and at 16 in most runs; 4 per CPU serves
	// the 8 streams asked for without spending more memory (about 130 MB
	// per decoder) than they need. A request that cannot have a decoder
	// is refused with overloaded rather than accepted onto a CPU that
	// cannot keep up.
	Decoders int
	// Parallel is how many decoders compute at once; default one per CPU.
	// Streams beyond it wait their turn a block at a time, and final
	// passes go first (see gate).
	Parallel int
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
	// 1 s. PocketSphinx normalises each utterance with a mean it only
	// updates between utterances. Left alone, a pooled decoder would use
	// the mean of whoever spoke to it last (so a transcript would depend on
	// another caller's voice and line), or on a fresh decoder the model's
	// built-in mean, which measured here is badly off for band-limited
	// voices (95% word errors on flite's 8 kHz kal voice with the general
	// model). Estimating it from the utterance itself delays only the
	// first partial transcript, by this window. The window starts 250 ms
	// before the first speech (by energy, window.go), not at the first
	// sample, and at most 2 s in: a pause before the first word is held
	// undecoded until the window is complete (up to 2 s more delay), so
	// that the mean, the pitch (SpeakerWarp) and the band (NarrowbandFold)
	// are the speaker's, not the pause's.
	CMNWindow time.Duration
	// NarrowbandFold is the gain of the mirror image of the band below
	// 4 kHz folded into the empty band above it, for audio that arrives at
	// 8 kHz (see narrowband.go); default DefaultNarrowbandFold, negative:
	// no fold.
	NarrowbandFold float64
	// NarrowbandAcoustic is how the acoustic model hears audio that
	// arrives at 8 kHz: NarrowbandTelephone (the default,
	// DefaultNarrowbandAcoustic) moves its means by a transform learned
	// from telephone audio, NarrowbandGeneral leaves them as for wideband
	// audio. Only with the general acoustic model in the default
	// ModelDir, the model the transform was estimated for; otherwise
	// narrowband audio is heard as wideband.
	NarrowbandAcoustic string
	// SecondModel is a second acoustic model that wideband audio is
	// decoded with too, in parallel, the transcript the lattice
	// posterior is surer of kept: SecondSynthetic (the default,
	// DefaultSecondModel) or SecondNone. Only with the general acoustic
	// model in the default ModelDir, the model its transform was
	// estimated for, and only for an utterance that starts while the
	// engine is not busy (BusyAbove) and, once its window is in, finds a
	// CPU of the gate left for it (utterances and second models in
	// progress fewer than Parallel) and a decoder free beyond BusyAbove's
	// worth, so that it costs CPU and decoders only when they are idle:
	// otherwise the utterance is decoded once.
	SecondModel string
	// SecondMargin is how much surer per word (the natural log of the
	// transcripts' posterior probabilities, each divided by its number
	// of words) the second model must be of its transcript than the
	// first of its own for the second's to be kept; 0 means
	// DefaultSecondMargin, a negative margin lets a less sure second
	// model win.
	SecondMargin float64
	// SecondWait bounds how long the transcript waits for the second
	// model's final pass once the first's has ended; zero, the default,
	// waits as long as the first's took, and at least 20 ms: a second
	// model that is late for a CPU must not make transcripts late. The
	// evaluation sets it long, so that its figures do not depend on the
	// machine's load.
	SecondWait time.Duration
	// SpeakerWarp is the frequency warp of a high voice: the features of
	// an utterance whose median pitch over its CMNWindow is
	// WarpPitch or more are computed with frequencies divided by it
	// (PocketSphinx's inverse linear -warp_params), which moves the
	// higher formants of a shorter vocal tract down to where the
	// acoustic model expects them (vocal tract length normalisation,
	// chosen per utterance from its pitch; see pitch.go). Default
	// DefaultSpeakerWarp; negative, or KeepCMN: no warp.
	SpeakerWarp float64
	// WarpPitch is the median pitch, in Hz, from which SpeakerWarp
	// applies; default DefaultWarpPitch.
	WarpPitch float64
	// KeepCMN instead carries the mean over from the decoder's previous
	// utterance, as PocketSphinx does by itself.
	KeepCMN bool
	// Args are extra PocketSphinx options as name/value pairs, e.g.
	// {"-lw", "8"}, for tuning; see pocketsphinx_continuous -help.
	Args []string
	// NoFwdflat skips PocketSphinx's second (flat-lexicon) pass in
	// Search, which makes finalisation faster at some cost in accuracy.
	NoFwdflat bool
	// Search is the search setting (Searches) of an utterance that starts
	// while the engine is not busy; default DefaultSearch. Args override
	// its options of the same name.
	Search string
	// BusySearch is the search setting of an utterance that starts while
	// the engine is busy: while more than BusyAbove utterances, itself
	// included, are in progress. Default DefaultBusySearch; set it to
	// Search for one search whatever the load (each decoder then holds
	// one search instead of two, about 30 MB less).
	BusySearch string
	// BusyAbove is the number of utterances in progress above which the
	// engine is busy; default 1 per CPU. SearchFast's second pass takes
	// up to about 170 ms of one CPU on a long utterance, so with more
	// utterances than CPUs ending together its finalisation p99 passes
	// 200 ms (docs/benchmarks.md).
	BusyAbove int

	// NBest is how many distinct hypotheses the final pass reports
	// (pipeline.Alternator: the transcript and the next best, from an A*
	// search over the final pass's lattice); 0 or 1, the default, none.
	// It costs a few milliseconds per utterance (docs/benchmarks.md).
	NBest int

	// adaptedArgs load the adapted parameters (see adaptedArgs), set by
	// New for AcousticAdapted.
	adaptedArgs []string
	// channels are the transform files by channel (see
	// channelTransforms), set by New for NarrowbandTelephone and
	// SecondSynthetic.
	channels [numChannels]string
}

func (c Config) withDefaults() Config {
	if c.ModelDir == "" {
		c.ModelDir = DefaultModelDir
	}
	if c.Acoustic == "" {
		c.Acoustic = DefaultAcoustic
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
		c.Decoders = 4 * runtime.NumCPU()
	}
	if c.Parallel == 0 {
		c.Parallel = runtime.NumCPU()
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
	if c.NarrowbandFold == 0 {
		c.NarrowbandFold = DefaultNarrowbandFold
	}
	if c.NarrowbandAcoustic == "" {
		c.NarrowbandAcoustic = DefaultNarrowbandAcoustic
	}
	if c.SecondModel == "" {
		c.SecondModel = DefaultSecondModel
	}
	if c.SecondMargin == 0 {
		c.SecondMargin = DefaultSecondMargin
	}
	if c.SpeakerWarp == 0 {
		c.SpeakerWarp = DefaultSpeakerWarp
	}
	if c.KeepCMN || c.SpeakerWarp == 1 {
		// The warped front end starts a fresh stream per utterance, which
		// KeepCMN exists to avoid; a warp of 1 is none.
		c.SpeakerWarp = -1
	}
	if c.WarpPitch == 0 {
		c.WarpPitch = DefaultWarpPitch
	}
	if c.Search == "" {
		c.Search = DefaultSearch
	}
	if c.BusySearch == "" {
		c.BusySearch = DefaultBusySearch
	}
	if c.BusyAbove == 0 {
		c.BusyAbove = runtime.NumCPU()
	}
	return c
}

// ResolvedSpeakerWarp returns the frequency warp of high voices and the pitch from
// which it applies as the engine resolves them from c (defaults, and no
// warp with KeepCMN or a warp of 1); warp is negative when there is none.
func (c Config) ResolvedSpeakerWarp() (warp, pitch float64) {
	c = c.withDefaults()
	return c.SpeakerWarp, c.WarpPitch
}

// decoderArgs is the PocketSphinx command line a decoder is made with: the
// model, the adapted parameters loaded over it (AcousticAdapted), then
// Args.
func (c Config) decoderArgs() []string {
	return mergeArgs(mergeArgs([]string{
		"-hmm", c.ModelDir,
		"-dict", c.Dict,
		"-samprate", "16000",
	}, c.adaptedArgs), c.Args)
}

// searchArgs are the options of one of the decoder's searches: the
// setting's, -fwdflat no for Search with NoFwdflat, then Args.
func (c Config) searchArgs(search string) []string {
	args := searchPreset(search)
	if search == c.Search && c.NoFwdflat {
		args = mergeArgs(args, []string{"-fwdflat", "no"})
	}
	return mergeArgs(args, c.Args)
}

// orderSearches returns the distinct search settings a decoder holds, those
// with a second pass last (see decoder.addSearches).
func (c Config) orderSearches() []string {
	if c.BusySearch == c.Search {
		return []string{c.Search}
	}
	if c.secondPass(c.Search) && !c.secondPass(c.BusySearch) {
		return []string{c.BusySearch, c.Search}
	}
	return []string{c.Search, c.BusySearch}
}

// secondPass reports whether a search setting runs PocketSphinx's second
// pass (-fwdflat, on unless said otherwise).
func (c Config) secondPass(search string) bool {
	args := c.searchArgs(search)
	for i := 0; i+1 < len(args); i += 2 {
		if args[i] == "-fwdflat" {
			switch strings.ToLower(args[i+1]) {
			case "no", "false", "0":
				return false
			}
			return true
		}
	}
	return true
}

// mergeArgs returns name/value pairs args followed by more, a later value
// of an option replacing an earlier one in place, so each option appears
// once.
func mergeArgs(args, more []string) []string {
	args = append([]string(nil), args...)
	at := map[string]int{}
	for i := 0; i+1 < len(args); i += 2 {
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

// validate checks the configuration and that the files it names exist:
// the named settings, then the numbers and options that tune the
// decoders, then the files.
func (c Config) validate() error {
	if err := c.validateNames(); err != nil {
		return err
	}
	if err := c.validateTuning(); err != nil {
		return err
	}
	return c.validateFiles()
}

// validateNames checks the named settings: the language model mode, the
// acoustic models and the searches.
func (c Config) validateNames() error {
	switch c.LM {
	case LMInterp, LMGeneral, LMDomain:
	case LMFile:
		if c.LMPath == "" {
			return errors.New("sphinx: LM mode \"file\" needs a model path")
		}
	default:
		return fmt.Errorf("sphinx: unknown LM mode %q (want %s, %s, %s or %s)", c.LM, LMInterp, LMGeneral, LMDomain, LMFile)
	}
	switch c.Acoustic {
	case AcousticGeneral:
	case AcousticAdapted:
		if filepath.Clean(c.ModelDir) != DefaultModelDir {
			return fmt.Errorf("sphinx: the adapted acoustic model is an adaptation of %s, not of %s (use acoustic model %q with another model directory)", DefaultModelDir, c.ModelDir, AcousticGeneral)
		}
	default:
		return fmt.Errorf("sphinx: unknown acoustic model %q (want one of %s)", c.Acoustic, strings.Join(Acoustics, ", "))
	}
	if !slices.Contains(NarrowbandAcoustics, c.NarrowbandAcoustic) {
		return fmt.Errorf("sphinx: unknown narrowband acoustic setting %q (want one of %s)", c.NarrowbandAcoustic, strings.Join(NarrowbandAcoustics, ", "))
	}
	if !slices.Contains(SecondModels, c.SecondModel) {
		return fmt.Errorf("sphinx: unknown second model setting %q (want one of %s)", c.SecondModel, strings.Join(SecondModels, ", "))
	}
	for _, s := range []string{c.Search, c.BusySearch} {
		if !slices.Contains(Searches, s) {
			return fmt.Errorf("sphinx: unknown search setting %q (want one of %s)", s, strings.Join(Searches, ", "))
		}
	}
	return nil
}

// validateTuning checks the numbers and the extra PocketSphinx options:
// out of range, they would fail later and worse (a negative CMN window
// made each utterance's first Write panic).
func (c Config) validateTuning() error {
	if c.BusyAbove < 1 {
		return fmt.Errorf("sphinx: busy above %d utterances, want >= 1", c.BusyAbove)
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"domain weight", c.DomainWeight}, {"narrowband fold", c.NarrowbandFold}, {"speaker warp", c.SpeakerWarp}, {"warp pitch", c.WarpPitch}, {"second margin", c.SecondMargin}} {
		// NaN passes every range check below: a NaN fold silenced every
		// call's audio.
		if math.IsNaN(f.v) || math.IsInf(f.v, 0) {
			return fmt.Errorf("sphinx: %s %v: want a finite number", f.name, f.v)
		}
	}
	if c.DomainWeight <= 0 || c.DomainWeight >= 1 {
		return fmt.Errorf("sphinx: domain weight %v out of range (0, 1)", c.DomainWeight)
	}
	if c.Decoders < 1 {
		return fmt.Errorf("sphinx: %d decoders, want >= 1", c.Decoders)
	}
	if c.Parallel < 1 {
		return fmt.Errorf("sphinx: %d parallel decoders, want >= 1", c.Parallel)
	}
	if err := validateArgs(c.Args); err != nil {
		return err
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"CMN window", c.CMNWindow}, {"longest utterance", c.MaxUtterance}, {"partial interval", c.PartialEvery}, {"wait for a decoder", c.MaxWait}} {
		if d.v < 0 {
			return fmt.Errorf("sphinx: %s %v is negative", d.name, d.v)
		}
	}
	if c.NBest < 0 || c.NBest > MaxNBest {
		return fmt.Errorf("sphinx: N-best %d out of range 0..%d", c.NBest, MaxNBest)
	}
	if c.Order < 1 || c.Order > 5 {
		return fmt.Errorf("sphinx: n-gram order %d out of range 1..5", c.Order)
	}
	return nil
}

// validateArgs checks that extra PocketSphinx options are name/value
// pairs, the form mergeArgs assumes.
func validateArgs(args []string) error {
	if len(args)%2 != 0 {
		return fmt.Errorf("sphinx: extra options %q are not name/value pairs", args)
	}
	for i := 0; i < len(args); i += 2 {
		if !strings.HasPrefix(args[i], "-") {
			return fmt.Errorf("sphinx: extra option name %q does not start with '-'", args[i])
		}
	}
	return nil
}

// validateFiles checks that the files exist. A missing acoustic model,
// dictionary or general language model (when the mode uses one) wraps
// ErrNotInstalled and pipeline.ErrUnavailable; a missing file of the
// caller's own (LMPath, Pronunciations) wraps the error of its stat.
func (c Config) validateFiles() error {
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
