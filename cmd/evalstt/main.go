// Command evalstt measures the embedded speech recogniser on the project's
// test utterances (internal/stages/stt/sttest), synthesised with flite and
// espeak-ng voices: word error rate per voice, overall and split into
// sentences from the domain text and paraphrases, for one or more language
// model settings; and, with -bench, real-time factor, finalisation latency,
// memory per decoder and how many concurrent real-time streams the machine
// sustains with finalisation p99 under a limit. It prints Markdown tables
// for docs/benchmarks.md.
//
//	go run ./cmd/evalstt                       # WER, default settings
//	go run ./cmd/evalstt -lm general,interp -weights 0.3,0.5,0.7
//	go run ./cmd/evalstt -wer=false -bench     # benchmark only
//	go run ./cmd/evalstt -set tuning -search fast -sphinx-args "-maxhmmpf 2000"  # tune here, not on the evaluation set
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/voiced/voiced/internal/domain"
	"github.com/voiced/voiced/internal/pipeline"
	"github.com/voiced/voiced/internal/stages/intent"
	"github.com/voiced/voiced/internal/stages/stt/lm"
	"github.com/voiced/voiced/internal/stages/stt/sphinx"
	"github.com/voiced/voiced/internal/stages/stt/sttest"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "evalstt:", err)
		os.Exit(1)
	}
}

type options struct {
	voices         []sttest.Voice
	modes          []string
	weights        []float64
	wer            bool
	bench          bool
	streams        []int
	limit          time.Duration
	perStream      int
	stagger        bool
	busy           string
	busyAbove      int
	verbose        bool
	noFwdflat      bool
	keepCMN        bool
	fold           float64
	narrowAcoustic string
	second         string
	secondMargin   float64
	speakerWarp    float64
	warpPitch      float64
	cmnWindow      time.Duration
	domainDir      string
	sets           []set
	search         string
	writeTr        string
	spoken         string
	workers        int
	telephone      bool
	acoustic       string
	nbest          int
	callers        bool
}

// acousticName is the acoustic model -acoustic selects.
func (o options) acousticName() string {
	if o.acoustic == "" {
		return sphinx.DefaultAcoustic
	}
	return o.acoustic
}

// utt is one utterance of an evaluation set: its text, the group its word
// error rate is reported in, and its intent when the set is labelled.
type utt struct {
	id, text, group, intent string
	wav                     string // a recording of it (the recorded set), spoken by sttest.Human
}

// set is a named group of utterances measured together.
type set struct {
	name   string // eval, tuning or heldout
	kind   string // how the set relates to the training data
	groups []string
	utts   []utt
}

func run() error {
	var (
		o                                                     options
		voices, modes, weights, streams, cfgPath, sargs, sets string
	)
	flag.StringVar(&voices, "voices", "flite-slt,flite-kal,espeak-en-us,espeak-en", "voices to evaluate; human: the recorded set's recordings")
	flag.StringVar(&modes, "lm", "interp", "language model modes to compare (general, domain, interp)")
	flag.StringVar(&weights, "weights", strconv.FormatFloat(sphinx.DefaultDomainWeight, 'g', -1, 64), "domain weights to try for -lm interp")
	flag.BoolVar(&o.wer, "wer", true, "measure word error rate")
	flag.BoolVar(&o.bench, "bench", false, "run the speed and concurrency benchmark")
	flag.StringVar(&streams, "streams", "2,4,6,8,10,12", "concurrent real-time stream counts to try in the benchmark")
	flag.DurationVar(&o.limit, "p99-limit", 200*time.Millisecond, "finalisation p99 a stream count must stay under")
	flag.IntVar(&o.perStream, "per-stream", 12, "utterances each concurrent stream speaks")
	flag.BoolVar(&o.stagger, "stagger", true, "start concurrent streams spread over an average utterance, as independent speakers would, rather than all at once")
	flag.BoolVar(&o.verbose, "v", false, "print every hypothesis")
	flag.BoolVar(&o.noFwdflat, "no-fwdflat", false, "skip the second decoding pass")
	flag.StringVar(&o.domainDir, "domain", "", "domain folder (default: the embedded help-desk domain)")
	flag.DurationVar(&o.cmnWindow, "cmn-window", 0, "audio the cepstral mean is estimated from (0: engine default)")
	flag.Float64Var(&o.fold, "narrowband-fold", 0, "gain of the band folded above 4 kHz for 8 kHz audio (0: the engine default; negative: none)")
	flag.Float64Var(&o.speakerWarp, "speaker-warp", 0, "frequency warp of high voices (0: the engine's default; negative: none)")
	flag.Float64Var(&o.warpPitch, "warp-pitch", 0, "median pitch in Hz from which -speaker-warp applies (0: the engine's default)")
	flag.StringVar(&o.narrowAcoustic, "narrowband-acoustic", "", "how 8 kHz audio is heard: "+strings.Join(sphinx.NarrowbandAcoustics, " or ")+" (default: the engine's, "+sphinx.DefaultNarrowbandAcoustic+")")
	flag.StringVar(&o.second, "second-model", sphinx.DefaultSecondModel, "second acoustic model for wideband audio: "+strings.Join(sphinx.SecondModels, " or ")+" (voiced's -stt.second-model)")
	flag.Float64Var(&o.secondMargin, "second-margin", 0, fmt.Sprintf("how much surer the second model must be for its transcript to be kept (voiced's -stt.second-margin; 0: %g)", sphinx.DefaultSecondMargin))
	flag.BoolVar(&o.keepCMN, "keep-cmn", false, "carry cepstral mean normalisation across utterances (PocketSphinx default)")
	flag.StringVar(&sets, "set", "eval", "utterance sets, comma-separated: eval (utterances.tsv), tuning (tuning.tsv, the domain's tuning caller questions and tuning split; choose settings on this one), heldout (the domain's held-out caller questions and held-out split; measure, never tune), recorded (people's speech from Debian packages; the voice human speaks it from the recordings)")
	flag.IntVar(&o.workers, "workers", 1, "utterances decoded at once for the word error rate and -write-spoken (decoding is deterministic, so only the time changes)")
	flag.StringVar(&o.spoken, "write-spoken", "", "decode the training split's intent examples spoken by -voices and write the transcripts (voice, example, transcript) to this file, the classifier's extra training data (domain spoken.tsv); nothing else is measured")
	flag.StringVar(&o.writeTr, "write-transcripts", "", "domain folder to write the tuning and held-out caller questions' transcripts to (eval/tuning-transcripts.tsv, eval/heldout-transcripts.tsv: voice, question, transcript), for evalintent and evalretrieval (one -lm setting)")
	flag.StringVar(&o.search, "search", sphinx.DefaultSearch, "decoder search setting: "+strings.Join(sphinx.Searches, ", ")+" (the engine default: "+sphinx.DefaultSearch+"; with -bench, utterances starting while more than -busy-above are in progress get -busy-search)")
	flag.StringVar(&o.busy, "busy-search", sphinx.DefaultBusySearch, "search setting of an utterance starting while the engine is busy (-busy-above); the same as -search for one search")
	flag.IntVar(&o.busyAbove, "busy-above", 0, "utterances in progress above which the engine is busy (0: the engine default, 1 per CPU)")
	flag.BoolVar(&o.telephone, "telephone", false, "send every clip as telephone audio: resampled to 8000 Hz and through G.711 mu-law and back, as a Twilio call or a mu-law session carries it")
	flag.StringVar(&o.acoustic, "acoustic", "", "acoustic model: "+strings.Join(sphinx.Acoustics, " or ")+" (default: the engine's, "+sphinx.DefaultAcoustic+")")
	flag.IntVar(&o.nbest, "nbest", 0, "ask the engine for this many distinct final-pass hypotheses per utterance (sphinx Config.NBest), time the N-best search, and with -write-transcripts also write eval/tuning-nbest.tsv and eval/heldout-nbest.tsv (voice, question, score, hypothesis; best first) for evalintent")
	flag.BoolVar(&o.callers, "callers", false, "decode only the caller questions of the tuning and held-out sets (what -write-transcripts writes), not their split's intent examples or tuning.tsv")
	flag.StringVar(&sargs, "sphinx-args", "", "extra PocketSphinx options, e.g. \"-lw 8\"")
	_ = cfgPath
	flag.Parse()
	var err error
	if o.voices, err = sttest.ParseVoices(voices); err != nil {
		return err
	}
	o.modes = strings.Split(modes, ",")
	for _, w := range strings.Split(weights, ",") {
		f, err := strconv.ParseFloat(strings.TrimSpace(w), 64)
		if err != nil {
			return fmt.Errorf("bad weight %q", w)
		}
		o.weights = append(o.weights, f)
	}
	for _, s := range strings.Split(streams, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			return fmt.Errorf("bad stream count %q", s)
		}
		o.streams = append(o.streams, n)
	}

	// SIGTERM too (timeout(1), kill): the deferred clean-up of temporary
	// files runs whichever signal stops the run.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	d, err := domain.LoadOrDefault(o.domainDir)
	if err != nil {
		return err
	}
	prons, cleanup, err := pronunciations(d)
	if err != nil {
		return err
	}
	defer cleanup()
	for _, tsv := range [][]sttest.Utterance{sttest.Utterances(), sttest.TuningUtterances()} {
		if err := checkSplit(d.CorpusSentences(), tsv); err != nil {
			return err
		}
	}
	// The domain language model and the classifier see the training split
	// and the articles only, so the tuning and held-out sets are unseen.
	train, err := d.Training()
	if err != nil {
		return err
	}
	corpus := train.CorpusSentences()
	for _, name := range strings.Split(sets, ",") {
		st, err := loadSet(d, corpus, strings.TrimSpace(name))
		if err != nil {
			return err
		}
		if o.callers {
			st.utts = slices.DeleteFunc(st.utts, func(u utt) bool { return u.group != "callers" })
		}
		o.sets = append(o.sets, st)
	}
	if o.writeTr != "" && (len(o.modes) != 1 || (o.modes[0] == sphinx.LMInterp && len(o.weights) != 1)) {
		return errors.New("-write-transcripts needs one -lm setting")
	}
	// A second model (-second-model) takes a second decoder per
	// utterance, only while a CPU of the gate is left for it and a CPU's
	// worth of decoders (BusyAbove) is left free. The evaluation gives
	// every utterance one, with a gate of two CPUs per worker, and waits
	// for its final pass however busy the machine is, so that its figures
	// depend on the audio alone.
	decoders, parallel := max(1, o.workers), 0
	if o.second != sphinx.SecondNone {
		decoders, parallel = 2*decoders+max(o.busyAbove, runtime.NumCPU()), 2*decoders
	}
	base := sphinx.Config{Decoders: decoders, Parallel: parallel, SecondModel: o.second, SecondMargin: o.secondMargin, SecondWait: time.Minute, Acoustic: o.acoustic, Pronunciations: prons, NoFwdflat: o.noFwdflat, KeepCMN: o.keepCMN, CMNWindow: o.cmnWindow, NarrowbandFold: o.fold, NarrowbandAcoustic: o.narrowAcoustic, SpeakerWarp: o.speakerWarp, WarpPitch: o.warpPitch, Args: strings.Fields(sargs), Search: o.search,
		BusySearch: o.busy, BusyAbove: o.busyAbove, NBest: o.nbest}
	if o.spoken != "" {
		cfg := base
		cfg.LM, cfg.DomainWeight = o.modes[0], o.weights[0]
		return writeSpoken(ctx, o, cfg, train, corpus)
	}
	fmt.Printf("evalstt %s, %d CPUs, %s/%s, domain %q: %d training corpus sentences (training split and articles)\n\n",
		time.Now().UTC().Format("2006-01-02 15:04 MST"), runtime.NumCPU(), runtime.GOOS, runtime.GOARCH,
		d.Name, len(corpus))
	var all []utt
	for _, st := range o.sets {
		all = append(all, st.utts...)
	}
	audio, err := synthAll(ctx, o.voices, all, o.telephone)
	if err != nil {
		return err
	}
	fmt.Printf("Acoustic model: %s. Search setting: %s (when busy: %s); extra PocketSphinx options: %q\n\n", o.acousticName(), o.search, o.busy, sargs)
	if o.wer {
		lex, err := train.Lexicon(sphinx.DefaultDict)
		if err != nil {
			return err
		}
		clf, err := intent.New(ctx, train.Intents, intent.Config{Known: train.KnownText(), Classes: train.Classes, Lexicon: lex})
		if err != nil {
			return err
		}
		if err := evalWER(ctx, o, base, corpus, audio, clf); err != nil {
			return err
		}
	}
	if o.bench {
		cfg := base
		cfg.SecondWait, cfg.Parallel = 0, 0 // as voiced has them
		cfg.LM = sphinx.LMInterp
		cfg.DomainWeight = o.weights[0]
		if err := benchmark(ctx, o, cfg, corpus, audio); err != nil {
			return err
		}
	}
	return nil
}

// pronunciations returns a path to the domain's pronunciations file, if it
// has one (an embedded domain's is copied to a temporary file).
func pronunciations(d *domain.Domain) (string, func(), error) {
	if p := d.PronunciationsPath(); p != "" {
		return p, func() {}, nil
	}
	data, err := d.ReadFile(domain.PronunciationsFile)
	if errors.Is(err, os.ErrNotExist) {
		return "", func() {}, nil
	}
	if err != nil {
		return "", nil, err
	}
	dir, err := os.MkdirTemp("", "evalstt-")
	if err != nil {
		return "", nil, err
	}
	p := filepath.Join(dir, domain.PronunciationsFile)
	return p, func() { os.RemoveAll(dir) }, os.WriteFile(p, data, 0o644)
}

// checkSplit verifies a set's labels against the domain text: "lit"
// sentences are in it, paraphrases are not.
func checkSplit(corpus []string, set []sttest.Utterance) error {
	in := map[string]bool{}
	for _, s := range corpus {
		if !strings.HasPrefix(s, lm.ClassLinePrefix) {
			in[lm.Normalize(s)] = true
		}
	}
	for _, u := range set {
		if in[lm.Normalize(u.Text)] == u.Paraphrase {
			return fmt.Errorf("test utterance %s (%q): paraphrase=%v but in domain text=%v", u.ID, u.Text, u.Paraphrase, !u.Paraphrase)
		}
	}
	return nil
}

// writeSpoken decodes every training example spoken by each voice and
// writes the transcripts, the classifier's extra training data.
func writeSpoken(ctx context.Context, o options, cfg sphinx.Config, train *domain.Domain, corpus []string) error {
	start := time.Now()
	e, err := sphinx.New(ctx, cfg, corpus, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	if err != nil {
		return err
	}
	defer e.Close()
	var jobs []job
	for _, in := range train.Intents {
		for _, ex := range in.Examples {
			for _, v := range o.voices {
				pcm, rate, err := sttest.Synth(ctx, v, ex)
				if err != nil {
					return err
				}
				jobs = append(jobs, job{v.Name, clip{utt{id: ex, text: ex}, pcm, rate}})
			}
		}
	}
	decoded, err := decodeMany(ctx, e, jobs, o.workers, "spoken")
	if err != nil {
		return err
	}
	lines := make([]string, len(jobs))
	for i, j := range jobs {
		lines[i] = j.voice + "\t" + j.c.u.text + "\t" + decoded[i].final
	}
	var names []string
	for _, v := range o.voices {
		names = append(names, v.Name)
	}
	head := fmt.Sprintf("# The recogniser's transcripts of the training split's intent examples (never the tuning or held-out\n"+
		"# split), each spoken by the voice in the first column: extra training data for the intent classifier\n"+
		"# (docs/domain.md). Made by\n"+
		"#   go run ./cmd/evalstt -write-spoken domain/helpdesk/spoken.tsv -voices %s\n"+
		"# (%s; the engine's defaults: acoustic model %s, %s, search %s, LM %s, domain weight %g, domain model from the training split\n"+
		"# and the articles). Decoding is deterministic: the same engines make the same file.\n# voice\texample\ttranscript\n",
		strings.Join(names, ","), time.Now().UTC().Format("2006-01-02"), o.acousticName(), o.warpName(), cfg.Search, cfg.LM, cfg.DomainWeight)
	fmt.Printf("%d transcripts written to %s in %v\n", len(lines), o.spoken, time.Since(start).Round(time.Second))
	return os.WriteFile(o.spoken, []byte(head+strings.Join(lines, "\n")+"\n"), 0o644)
}

// warpName says which speaker warp the engine uses (sphinx.Config.SpeakerWarp).
func (o options) warpName() string {
	w, p := sphinx.Config{SpeakerWarp: o.speakerWarp, WarpPitch: o.warpPitch, KeepCMN: o.keepCMN}.ResolvedSpeakerWarp()
	if w < 0 {
		return "no speaker warp"
	}
	return fmt.Sprintf("speaker warp %g from %g Hz", w, p)
}

// loadSet returns the named utterance set. corpus is the training text:
// a sentence of the project's test sets is reported as "seen" when it is
// in it, "unseen" when not.
func loadSet(d *domain.Domain, corpus []string, name string) (set, error) {
	sents, _, err := lm.ParseCorpus(corpus)
	if err != nil {
		return set{}, err
	}
	seen := map[string]bool{}
	for _, ws := range sents {
		seen[strings.Join(ws, " ")] = true
	}
	fromTSV := func(us []sttest.Utterance) []utt {
		var out []utt
		for _, u := range us {
			g := "unseen"
			if seen[lm.Normalize(u.Text)] {
				g = "seen"
			}
			out = append(out, utt{id: u.ID, text: u.Text, group: g})
		}
		return out
	}
	fromDomain := func(sp domain.Split, file, prefix string) ([]utt, error) {
		qs, err := d.RetrievalEvalFile(file)
		if err != nil {
			return nil, err
		}
		var out []utt
		for i, q := range qs {
			out = append(out, utt{id: fmt.Sprintf("%s%03d", prefix, i+1), text: q.Question, group: "callers", intent: q.Intent})
		}
		intents, err := d.SplitIntents(sp)
		if err != nil {
			return nil, err
		}
		for _, in := range intents {
			for i, ex := range in.Examples {
				out = append(out, utt{id: fmt.Sprintf("%s-%s-%d", sp, in.Name, i+1), text: ex, group: "examples", intent: in.Name})
			}
		}
		return out, nil
	}
	switch name {
	case "eval":
		return set{name: name, kind: "utterances.tsv: sentences seen in the training text and unseen ones", groups: []string{"seen", "unseen"}, utts: fromTSV(sttest.Utterances())}, nil
	case "tuning":
		us, err := fromDomain(domain.SplitTuning, domain.TuningFile, "t")
		return set{name: name, kind: "tuning: " + domain.TuningFile + " caller questions, the tuning split's intent examples, and tuning.tsv",
			groups: []string{"callers", "examples", "seen", "unseen"}, utts: append(us, fromTSV(sttest.TuningUtterances())...)}, err
	case "recorded":
		return recordedSet()
	case "heldout":
		us, err := fromDomain(domain.SplitHeldOut, domain.HeldOutFile, "h")
		return set{name: name, kind: "held-out: " + domain.HeldOutFile + " caller questions and the held-out split's intent examples",
			groups: []string{"callers", "examples"}, utts: us}, err
	}
	return set{}, fmt.Errorf("unknown -set %q (want eval, tuning, heldout or recorded)", name)
}

// recordedSet is people's speech (sttest.Recordings): the voice human
// speaks it from the recordings, the synthetic voices from its text.
func recordedSet() (set, error) {
	dict, err := lm.DictionaryWords(sphinx.DefaultDict)
	if err != nil {
		return set{}, err
	}
	recs, skipped, err := sttest.Recordings(func(w string) bool { return dict[w] })
	if err != nil {
		return set{}, err
	}
	st := set{name: "recorded", groups: []string{"asterisk-tuning", "asterisk-heldout", "librivox", "cards"},
		kind: fmt.Sprintf("recorded: people's speech from Debian packages, Asterisk's prompts at 8 kHz (split in halves by a hash of their names: choose settings on the tuning half), and LibriVox sentences and playing-card phrases at 16 kHz; %d prompts with digits, symbols or words outside the dictionary left out", skipped)}
	for _, r := range recs {
		g := r.Source
		if g == "asterisk" {
			g += "-" + half(r.ID)
		}
		st.utts = append(st.utts, utt{id: r.ID, text: r.Text, group: g, wav: r.Path})
	}
	return st, nil
}

// half puts a recording in the tuning or the held-out half, by a hash of
// its id: the same half in every run, whatever else is installed.
func half(id string) string {
	h := fnv.New32a()
	h.Write([]byte(id))
	if h.Sum32()%2 == 0 {
		return "tuning"
	}
	return "heldout"
}

type clip struct {
	u    utt
	pcm  []int16
	rate int
}

func synthAll(ctx context.Context, voices []sttest.Voice, set []utt, telephone bool) (map[string][]clip, error) {
	out := map[string][]clip{}
	for _, v := range voices {
		for _, u := range set {
			if v == sttest.Human {
				if u.wav == "" {
					continue // only recordings have a human voice
				}
				pcm, rate, err := sttest.ReadWAV(u.wav)
				if err != nil {
					return nil, err
				}
				out[v.Name] = append(out[v.Name], clip{u, pcm, rate})
				continue
			}
			pcm, rate, err := sttest.Synth(ctx, v, u.text)
			if err != nil {
				return nil, err
			}
			if telephone {
				if pcm, rate, err = sttest.Telephone(pcm, rate); err != nil {
					return nil, err
				}
			}
			out[v.Name] = append(out[v.Name], clip{u, pcm, rate})
		}
	}
	return out, nil
}

// decode streams one clip in 20 ms frames (as fast as it decodes) and
// returns the transcript and how long Finish took.
func decode(ctx context.Context, tr pipeline.Transcriber, c clip) (string, time.Duration, error) {
	h, err := decodeAll(ctx, tr, c)
	return h.final, h.finish, err
}

// job is one clip spoken by one voice.
type job struct {
	voice string
	c     clip
}

// decodeMany decodes jobs on workers decoders at once (the engine needs as
// many) and returns their hypotheses in the order of jobs.
func decodeMany(ctx context.Context, tr pipeline.Transcriber, jobs []job, workers int, label string) ([]hyps, error) {
	out := make([]hyps, len(jobs))
	errs := make([]error, len(jobs))
	next := make(chan int)
	var wg sync.WaitGroup
	var mu sync.Mutex
	done := 0
	for range max(1, workers) {
		wg.Go(func() {
			for i := range next {
				t0 := time.Now()
				out[i], errs[i] = decodeAll(ctx, tr, jobs[i].c)
				out[i].took = time.Since(t0)
				if errs[i] != nil {
					errs[i] = fmt.Errorf("%s %s: %w", jobs[i].voice, jobs[i].c.u.id, errs[i])
				}
				mu.Lock()
				if done++; done%100 == 0 {
					fmt.Fprintf(os.Stderr, "evalstt: %s: %d/%d decoded\n", label, done, len(jobs))
				}
				mu.Unlock()
			}
		})
	}
	for i := range jobs {
		next <- i
	}
	close(next)
	wg.Wait()
	return out, errors.Join(errs...)
}

// hyps are what the recogniser made of one clip: the transcript, the
// first pass's hypothesis over the whole clip just before the final pass
// (when the recogniser reports it), and the last partial it returned.
type hyps struct {
	final, first, partial string
	finish                time.Duration
	took                  time.Duration // the whole decode
	alts                  []pipeline.Hypothesis
	nbest, nbestCPU       time.Duration // the N-best search's share of finish, and its CPU time
}

func decodeAll(ctx context.Context, tr pipeline.Transcriber, c clip) (hyps, error) {
	var h hyps
	r, err := tr.Start(ctx, c.rate)
	if err != nil {
		return h, err
	}
	defer r.Close()
	fr := c.rate / 50
	for i := 0; i < len(c.pcm); i += fr {
		if h.partial, err = r.Write(ctx, c.pcm[i:min(i+fr, len(c.pcm))]); err != nil {
			return h, err
		}
	}
	start := time.Now()
	h.final, err = r.Finish(ctx)
	h.finish = time.Since(start)
	if fp, ok := r.(interface{ FirstPass() string }); ok {
		h.first = fp.FirstPass()
	}
	if a, ok := r.(pipeline.Alternator); ok {
		h.alts = a.Alternatives()
	}
	if nt, ok := r.(interface {
		NBestTime() (time.Duration, time.Duration)
	}); ok {
		h.nbest, h.nbestCPU = nt.NBestTime()
	}
	return h, err
}

// stream plays c as a client speaking in real time would, through the
// queue the server puts between a connection and its recognizer: a 20 ms
// frame is due every 20 ms whether or not the recognizer has kept up, and
// when the last one is due the recognizer is hurried, as the pipeline
// does when the final frame arrives. The latency returned runs from the
// moment the last frame was due, so audio the recognizer had fallen
// behind on counts against it. busy reports a transcript the recognizer
// degraded (a busy engine's cheaper search).
func stream(ctx context.Context, tr pipeline.Transcriber, c clip) (latency time.Duration, busy bool, err error) {
	r, err := tr.Start(ctx, c.rate)
	if err != nil {
		return 0, false, err
	}
	defer r.Close()
	fr := c.rate / 50
	// The server's queue: a recognizer that falls behind makes it longer,
	// and the backlog shows as finalisation latency.
	frames := pipeline.NewFrameQueue(nil)
	var end time.Time // when the last frame was due; read after the final frame is taken
	// The client goroutine is stopped and waited for before r is closed
	// (deferred calls run last first), so it never hurries a closed r.
	var client sync.WaitGroup
	defer client.Wait()
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	client.Go(func() {
		t0 := time.Now()
		tick := time.NewTimer(0)
		defer tick.Stop()
		for i, k := 0, 0; i < len(c.pcm); i, k = i+fr, k+1 {
			due := t0.Add(time.Duration(k) * 20 * time.Millisecond)
			tick.Reset(time.Until(due))
			select {
			case <-tick.C:
			case <-ctx.Done():
				return
			}
			last := i+fr >= len(c.pcm)
			if last {
				end = due // not when the timer fired: a late timer is the machine's delay, not the recognizer's head start
			}
			_ = frames.Push(pipeline.Frame{PCM: c.pcm[i:min(i+fr, len(c.pcm))], Final: last})
		}
		if h, ok := r.(pipeline.Hurrier); ok {
			h.Hurry()
		}
	})
	var batch []pipeline.Frame
	for done := false; !done; {
		batch = frames.Take(batch[:0])
		if len(batch) == 0 {
			select {
			case <-frames.Ready():
			case <-ctx.Done():
				return 0, false, ctx.Err()
			}
			continue
		}
		for _, f := range batch {
			if _, err := r.Write(ctx, f.PCM); err != nil {
				return 0, false, err
			}
			done = f.Final
		}
	}
	if _, err := r.Finish(ctx); err != nil {
		return 0, false, err
	}
	latency = time.Since(end)
	if d, ok := r.(pipeline.Degrader); ok {
		busy = d.Degradation() != ""
	}
	return latency, busy, nil
}

type score struct{ errs, words int }

func (s *score) add(e, n int) { s.errs += e; s.words += n }
func (s score) String() string {
	if s.words == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", 100*float64(s.errs)/float64(s.words))
}

// domainModel is the domain language model as the recogniser builds it,
// for scoring hypotheses.
func domainModel(corpus []string) (*lm.Model, error) {
	sents, classes, err := lm.ParseCorpus(corpus)
	if err != nil {
		return nil, err
	}
	return lm.BuildClasses(sents, 3, classes)
}

// logProb is the log10 probability of a sentence under m.
func logProb(m *lm.Model, text string) float64 {
	hist := []string{lm.BOS}
	var lp float64
	for _, w := range append(strings.Fields(text), lm.EOS) {
		lp += math.Log10(m.Prob(hist, w))
		hist = append(hist, w)
	}
	return lp
}

// passChoiceNames are the alternatives passChoices returns, in order.
var passChoiceNames = []string{"final", "first pass", "last partial", "first if LM better by 0", "first if LM better by 2", "first if LM better by 4"}

// passChoices returns the transcript each way of choosing between the
// final and the first pass would give.
func passChoices(m *lm.Model, h hyps) []struct{ name, text string } {
	out := []struct{ name, text string }{{"final", h.final}, {"first pass", h.first}, {"last partial", h.partial}}
	gain := logProb(m, h.first) - logProb(m, h.final)
	for i, margin := range []float64{0, 2, 4} {
		text := h.final
		if h.first != h.final && gain > margin {
			text = h.first
		}
		out = append(out, struct{ name, text string }{passChoiceNames[3+i], text})
	}
	return out
}

func evalWER(ctx context.Context, o options, base sphinx.Config, corpus []string, audio map[string][]clip, clf *intent.Classifier) error {
	settings := settingsOf(o, base)
	dlm, err := domainModel(corpus)
	if err != nil {
		return err
	}
	out := &callerOutput{transcripts: map[string][]string{}, nbests: map[string][]string{}}
	var results []werResult
	for _, s := range settings {
		r, err := evalSetting(ctx, o, s, corpus, dlm, audio, clf, out)
		if err != nil {
			return err
		}
		results = append(results, r)
	}
	for _, st := range o.sets {
		printSet(o, st, settings, results)
	}
	if o.nbest > 1 {
		printNBestCost(o, settings, results)
	}
	return out.write(o, settings[0].name)
}

// setting is one recogniser configuration evalWER measures.
type setting struct {
	name string
	cfg  sphinx.Config
}

// settingsOf lists the configurations of o's language-model modes (and,
// for interpolation, its domain weights) on base.
func settingsOf(o options, base sphinx.Config) []setting {
	var settings []setting
	for _, m := range o.modes {
		cfg := base
		cfg.LM = m
		if m == sphinx.LMInterp {
			for _, w := range o.weights {
				cfg.DomainWeight = w
				settings = append(settings, setting{fmt.Sprintf("interp w=%.2f", w), cfg})
			}
			continue
		}
		settings = append(settings, setting{m, cfg})
	}
	return settings
}

// werResult is what one setting scored.
type werResult struct {
	wer    map[string]map[string]*score // set -> voice/group key -> score
	intent map[string]map[string][2]int // set -> voice -> correct, labelled
	rtf    float64
	fin    []time.Duration
	nbest  []time.Duration // the N-best search's time per utterance
	ncpu   []time.Duration // and its CPU time
	nalts  int             // hypotheses returned, over all utterances
}

// add counts errs errors in n words under set and key.
func (r *werResult) add(set, key string, errs, n int) {
	if r.wer[set][key] == nil {
		r.wer[set][key] = &score{}
	}
	r.wer[set][key].add(errs, n)
}

// callerOutput collects the caller questions' transcripts and N-best
// lists, by set, for -write-transcripts.
type callerOutput struct {
	transcripts map[string][]string // set name -> lines
	nbests      map[string][]string // set name -> N-best lines
}

// evalSetting decodes every clip of o's voices with setting s and scores
// it: word errors by voice and group, the final pass's alternatives, and
// the intent of each labelled transcript. Caller questions' transcripts
// go to out.
func evalSetting(ctx context.Context, o options, s setting, corpus []string, dlm *lm.Model, audio map[string][]clip, clf *intent.Classifier, out *callerOutput) (werResult, error) {
	e, err := sphinx.New(ctx, s.cfg, corpus, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	if err != nil {
		return werResult{}, err
	}
	defer e.Close()
	r := werResult{wer: map[string]map[string]*score{}, intent: map[string]map[string][2]int{}}
	inSet := map[string]string{}
	for _, st := range o.sets {
		r.wer[st.name] = map[string]*score{}
		r.intent[st.name] = map[string][2]int{}
		for _, u := range st.utts {
			inSet[u.id] = st.name
		}
	}
	var jobs []job
	for _, v := range o.voices {
		for _, c := range audio[v.Name] {
			jobs = append(jobs, job{v.Name, c})
		}
	}
	decoded, err := decodeMany(ctx, e, jobs, o.workers, s.name)
	if err != nil {
		return werResult{}, err
	}
	var busy, secs float64
	for i, j := range jobs {
		v, c, hs := j.voice, j.c, decoded[i]
		hyp := hs.final
		busy += hs.took.Seconds()
		secs += float64(len(c.pcm)) / float64(c.rate)
		r.fin = append(r.fin, hs.finish)
		if o.nbest > 1 {
			r.nbest = append(r.nbest, hs.nbest)
			r.ncpu = append(r.ncpu, hs.nbestCPU)
			r.nalts += len(hs.alts)
		}
		name := inSet[c.u.id]
		ref := lm.Scored(c.u.text)
		errs, n := sttest.WordErrors(ref, lm.Scored(hyp))
		r.add(name, v+"/"+c.u.group, errs, n)
		r.add(name, v, errs, n)
		// The alternatives to the final pass's transcript.
		for _, alt := range passChoices(dlm, hs) {
			ae, an := sttest.WordErrors(ref, lm.Scored(alt.text))
			r.add(name, v+"#"+alt.name, ae, an)
		}
		if c.u.intent != "" {
			got, err := clf.Classify(ctx, hyp)
			if err != nil {
				return werResult{}, err
			}
			ic := r.intent[name][v]
			if got.Name == c.u.intent {
				ic[0]++
			}
			ic[1]++
			r.intent[name][v] = ic
		}
		if c.u.group == "callers" {
			out.transcripts[name] = append(out.transcripts[name], v+"\t"+c.u.text+"\t"+hyp)
			for _, a := range hs.alts {
				out.nbests[name] = append(out.nbests[name], fmt.Sprintf("%s\t%s\t%.6f\t%s", v, c.u.text, a.Score, a.Text))
			}
		}
		if o.verbose && errs > 0 {
			fmt.Fprintf(os.Stderr, "%s %s %s: %d errors\n  ref: %s\n  hyp: %s\n", s.name, v, c.u.id, errs, ref, hyp)
		}
	}
	r.rtf = busy / secs
	return r, nil
}

// printSet prints a set's tables: word error rate by setting and voice,
// the final pass against the first pass, and the intent end to end.
func printSet(o options, st set, settings []setting, results []werResult) {
	fmt.Printf("## Word error rate, %s set (%s; %d utterances)\n\n", st.name, st.kind, len(st.utts))
	header, sep := "| LM |", "|---|"
	for _, v := range o.voices {
		header += fmt.Sprintf(" %s (%s / all) |", v.Name, strings.Join(st.groups, " / "))
		sep += "---|"
	}
	fmt.Println(header + " RTF | finalise p50 / p99 |")
	fmt.Println(sep + "---|---|")
	for i, s := range settings {
		r := results[i]
		row := "| " + s.name + " |"
		for _, v := range o.voices {
			var parts []string
			for _, g := range st.groups {
				sc := r.wer[st.name][v.Name+"/"+g]
				if sc == nil {
					sc = &score{}
				}
				parts = append(parts, sc.String())
			}
			row += fmt.Sprintf(" %s / **%s** |", strings.Join(parts, " / "), r.wer[st.name][v.Name])
		}
		fmt.Printf("%s %.3f | %v / %v |\n", row, r.rtf, pct(r.fin, 50), pct(r.fin, 99))
	}
	fmt.Println()
	voicesOnly := strings.ReplaceAll(header, " ("+strings.Join(st.groups, " / ")+" / all)", "")
	fmt.Printf("Final pass against the first pass (%s set): the transcript, the first pass's hypothesis just before the final pass, the last partial, and the first pass when its domain-model log10 probability is higher by more than a margin:\n\n", st.name)
	fmt.Println(voicesOnly + " all voices |")
	fmt.Println(sep + "---|")
	for i, s := range settings {
		for _, alt := range passChoiceNames {
			row := "| " + s.name + ", " + alt + " |"
			var tot score
			for _, v := range o.voices {
				sc := results[i].wer[st.name][v.Name+"#"+alt]
				if sc == nil {
					sc = &score{}
				}
				tot.add(sc.errs, sc.words)
				row += " " + sc.String() + " |"
			}
			fmt.Println(row + " " + tot.String() + " |")
		}
	}
	fmt.Println()
	if len(results) == 0 || len(results[0].intent[st.name]) == 0 {
		return
	}
	fmt.Printf("Intent accuracy end to end on the %s set (transcripts classified by the classifier trained on the training split):\n\n", st.name)
	fmt.Println(voicesOnly)
	fmt.Println(sep)
	for i, s := range settings {
		row := "| " + s.name + " |"
		for _, v := range o.voices {
			ic := results[i].intent[st.name][v.Name]
			row += fmt.Sprintf(" %.1f%% (%d/%d) |", 100*float64(ic[0])/float64(max(1, ic[1])), ic[0], ic[1])
		}
		fmt.Println(row)
	}
	fmt.Println()
}

// printNBestCost prints what the N-best search added to each utterance.
func printNBestCost(o options, settings []setting, results []werResult) {
	fmt.Printf("N-best search (-nbest %d), the final pass's extra cost per utterance (CPU time, and wall-clock time, which on a busy machine includes waiting for a CPU):\n\n"+
		"| LM | utterances | hypotheses per utterance | CPU mean / p50 / p99 / max | wall mean / p50 / p99 / max | finalise p50 / p99 (N-best included) |\n|---|---|---|---|---|---|\n", o.nbest)
	stats := func(ds []time.Duration) string {
		var sum time.Duration
		for _, d := range ds {
			sum += d
		}
		return fmt.Sprintf("%v / %v / %v / %v", (sum / time.Duration(max(1, len(ds)))).Round(10*time.Microsecond), pctFine(ds, 50), pctFine(ds, 99), pctFine(ds, 100))
	}
	for i, s := range settings {
		r := results[i]
		fmt.Printf("| %s | %d | %.1f | %s | %s | %v / %v |\n", s.name, len(r.nbest), float64(r.nalts)/float64(max(1, len(r.nbest))),
			stats(r.ncpu), stats(r.nbest), pct(r.fin, 50), pct(r.fin, 99))
	}
	fmt.Println()
}

// write writes the caller questions' N-best lists and transcripts into
// o.writeTr, when asked, with a header saying how they were made (lm names
// the first setting's language model).
func (out *callerOutput) write(o options, lm string) error {
	for name, file := range map[string]string{"heldout": domain.HeldOutNBestFile, "tuning": domain.TuningNBestFile} {
		if o.writeTr == "" || o.nbest < 2 || out.nbests[name] == nil {
			continue
		}
		head := fmt.Sprintf("# The embedded recogniser's N-best lists of the %s caller questions (evalstt -set %s -callers -nbest %d -write-transcripts, %s,\n"+
			"# acoustic model %s, %s, search %s, LM %s, domain model from the training split and the articles): up to %d distinct\n"+
			"# hypotheses per question and voice, best first (the first is the transcript), with PocketSphinx's path score (natural log).\n# voice\tquestion\tscore\thypothesis\n",
			name, name, o.nbest, time.Now().UTC().Format("2006-01-02"), o.acousticName(), o.warpName(), o.search, lm, o.nbest)
		if err := os.WriteFile(filepath.Join(o.writeTr, file), []byte(head+strings.Join(out.nbests[name], "\n")+"\n"), 0o644); err != nil {
			return err
		}
	}
	for name, file := range map[string]string{"heldout": domain.HeldOutTranscriptsFile, "tuning": domain.TuningTranscriptsFile} {
		if o.writeTr == "" || out.transcripts[name] == nil {
			continue
		}
		head := fmt.Sprintf("# The embedded recogniser's transcripts of the %s caller questions (evalstt -set %s -write-transcripts, %s,\n# acoustic model %s, %s, search %s, LM %s, domain model from the training split and the articles).\n# voice\tquestion\ttranscript\n",
			name, name, time.Now().UTC().Format("2006-01-02"), o.acousticName(), o.warpName(), o.search, lm)
		if err := os.WriteFile(filepath.Join(o.writeTr, file), []byte(head+strings.Join(out.transcripts[name], "\n")+"\n"), 0o644); err != nil {
			return err
		}
	}
	return nil
}

func benchmark(ctx context.Context, o options, cfg sphinx.Config, corpus []string, audio map[string][]clip) error {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	var clips []clip
	for _, v := range o.voices {
		clips = append(clips, audio[v.Name]...)
	}

	// Memory per decoder: RSS growth from building an engine, over its
	// decoders (the domain model build is small and counted in).
	fmt.Println("## Speed and memory (one stream, decoding as fast as possible)")
	fmt.Println()
	rss0 := rss()
	const memDecoders = 4
	mcfg := cfg
	mcfg.Decoders = memDecoders
	start := time.Now()
	e, err := sphinx.New(ctx, mcfg, corpus, log, nil)
	if err != nil {
		return err
	}
	warm := time.Since(start)
	perDecoder := float64(rss()-rss0) / memDecoders / (1 << 20)

	var audioSecs, busy float64
	var fin []time.Duration
	cpu0 := cpuTime()
	for _, c := range clips {
		t0 := time.Now()
		_, f, err := decode(ctx, e, c)
		if err != nil {
			e.Close()
			return err
		}
		busy += time.Since(t0).Seconds()
		audioSecs += float64(len(c.pcm)) / float64(c.rate)
		fin = append(fin, f)
	}
	cpu := cpuTime() - cpu0
	e.Close()
	fmt.Println("| measure | value |")
	fmt.Println("|---|---|")
	fmt.Printf("| decoders warmed (%d, %d CPUs) | %v |\n", memDecoders, runtime.NumCPU(), warm.Round(10*time.Millisecond))
	fmt.Printf("| memory per decoder (RSS) | %.0f MB |\n", perDecoder)
	fmt.Printf("| real-time factor | %.3f (%d utterances, %.0f s of audio) |\n", busy/audioSecs, len(clips), audioSecs)
	fmt.Printf("| CPU time over audio (every thread, both models when there are two) | %.3f |\n", cpu.Seconds()/audioSecs)
	fmt.Printf("| finalisation p50 / p99 | %v / %v |\n", pct(fin, 50), pct(fin, 99))
	fmt.Println()

	meanClip := time.Duration(audioSecs / float64(len(clips)) * float64(time.Second))
	start0 := "together"
	if o.stagger {
		start0 = fmt.Sprintf("staggered over the mean utterance, %v", meanClip.Round(10*time.Millisecond))
	}
	fmt.Printf("## Concurrent real-time streams (each speaks %d utterances back to back in 20 ms frames at real-time pace; streams start %s)\n\n", o.perStream, start0)
	fmt.Println("Latency runs from the moment the last frame of an utterance was due to its final transcript.")
	fmt.Println()
	fmt.Println("| streams | finalisation p50 | p99 | max | busy search | overloaded | under limit |")
	fmt.Println("|---|---|---|---|---|---|---|")
	best := 0
	for _, n := range o.streams {
		scfg := cfg
		scfg.Decoders = n
		if o.second != sphinx.SecondNone {
			// As voiced's default pool (4 per CPU) has them while at
			// most BusyAbove utterances are in progress: a second
			// decoder each, and BusyAbove more kept free.
			scfg.Decoders += 2 * max(o.busyAbove, runtime.NumCPU())
		}
		e, err := sphinx.New(ctx, scfg, corpus, log, nil)
		if err != nil {
			return err
		}
		var mu sync.Mutex
		var lat []time.Duration
		var overloaded, busy int
		var wg sync.WaitGroup
		var firstErr error
		for s := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if o.stagger {
					// Independent speakers: stream s starts s/n of an
					// average utterance after the first.
					wait := time.NewTimer(time.Duration(s) * meanClip / time.Duration(n))
					defer wait.Stop()
					select {
					case <-wait.C:
					case <-ctx.Done():
						return
					}
				}
				for k := range o.perStream {
					c := clips[(s*o.perStream+k*7)%len(clips)]
					f, b, err := stream(ctx, e, c)
					mu.Lock()
					switch {
					case errors.Is(err, pipeline.ErrOverloaded):
						overloaded++
					case err != nil:
						if firstErr == nil {
							firstErr = err
						}
					default:
						lat = append(lat, f)
						if b {
							busy++
						}
					}
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		e.Close()
		if firstErr != nil {
			return firstErr
		}
		ok := overloaded == 0 && pct(lat, 99) < o.limit
		if ok {
			best = n
		}
		fmt.Printf("| %d | %v | %v | %v | %d%% | %d | %v |\n", n, pct(lat, 50), pct(lat, 99), pct(lat, 100), 100*busy/max(1, len(lat)), overloaded, ok)
		runtime.GC()
		debug.FreeOSMemory()
	}
	fmt.Printf("\nSustained with finalisation p99 < %v: %d concurrent real-time streams.\n", o.limit, best)
	return nil
}

// pct is the p-th percentile of d to the millisecond.
func pct(d []time.Duration, p int) time.Duration {
	return percentile(d, p).Round(time.Millisecond)
}

// pctFine is pct to the 10 microseconds, for sub-millisecond times.
func pctFine(d []time.Duration, p int) time.Duration {
	return percentile(d, p).Round(10 * time.Microsecond)
}

// percentile is the p-th percentile of d (nearest rank); 0 when d is
// empty.
func percentile(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := min(len(s)-1, (len(s)*p+99)/100-1)
	return s[max(0, i)]
}

// cpuTime is the CPU time the process has used, user and system, every
// thread.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// rss is the process's resident set size in bytes.
func rss() int64 {
	runtime.GC()
	debug.FreeOSMemory()
	data, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(data))
	if len(f) < 2 {
		return 0
	}
	pages, _ := strconv.ParseInt(f[1], 10, 64)
	return pages * int64(os.Getpagesize())
}
