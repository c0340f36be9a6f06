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
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/voiced/voiced/internal/domain"
	"github.com/voiced/voiced/internal/pipeline"
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
	voices    []sttest.Voice
	modes     []string
	weights   []float64
	wer       bool
	bench     bool
	streams   []int
	limit     time.Duration
	perStream int
	stagger   bool
	busy      string
	busyAbove int
	verbose   bool
	noFwdflat bool
	keepCMN   bool
	cmnWindow time.Duration
	domainDir string
	set       []sttest.Utterance
	search    string
}

func run() error {
	var (
		o                                                    options
		voices, modes, weights, streams, cfgPath, sargs, set string
	)
	flag.StringVar(&voices, "voices", "flite-slt,flite-kal,espeak-en-us,espeak-en", "voices to evaluate")
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
	flag.BoolVar(&o.keepCMN, "keep-cmn", false, "carry cepstral mean normalisation across utterances (PocketSphinx default)")
	flag.StringVar(&set, "set", "eval", "utterances: eval (the evaluation set, utterances.tsv) or tuning (tuning.tsv; choose settings on this one)")
	flag.StringVar(&o.search, "search", sphinx.DefaultSearch, "decoder search setting: "+strings.Join(sphinx.Searches, ", ")+" (the engine default: "+sphinx.DefaultSearch+"; with -bench, utterances starting while more than -busy-above are in progress get -busy-search)")
	flag.StringVar(&o.busy, "busy-search", sphinx.DefaultBusySearch, "search setting of an utterance starting while the engine is busy (-busy-above); the same as -search for one search")
	flag.IntVar(&o.busyAbove, "busy-above", 0, "utterances in progress above which the engine is busy (0: the engine default, 1 per CPU)")
	flag.StringVar(&sargs, "sphinx-args", "", "extra PocketSphinx options, e.g. \"-lw 8\"")
	_ = cfgPath
	flag.Parse()
	for _, n := range strings.Split(voices, ",") {
		v, ok := sttest.VoiceByName(strings.TrimSpace(n))
		if !ok {
			return fmt.Errorf("unknown voice %q", n)
		}
		if !v.Available() {
			return fmt.Errorf("voice %s: %w", v.Name, sttest.ErrNoSynth)
		}
		o.voices = append(o.voices, v)
	}
	switch set {
	case "eval":
		o.set = sttest.Utterances()
	case "tuning":
		o.set = sttest.TuningUtterances()
	default:
		return fmt.Errorf("unknown -set %q (want eval or tuning)", set)
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

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
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
	corpus := d.CorpusSentences()
	fmt.Printf("evalstt %s, %d CPUs, %s/%s, domain %q: %d corpus sentences, %d utterances (%s set)\n\n",
		time.Now().UTC().Format("2006-01-02 15:04 MST"), runtime.NumCPU(), runtime.GOOS, runtime.GOARCH,
		d.Name, len(corpus), len(o.set), set)
	if err := checkSplit(corpus, o.set); err != nil {
		return err
	}
	audio, err := synthAll(ctx, o.voices, o.set)
	if err != nil {
		return err
	}
	base := sphinx.Config{Decoders: 1, Pronunciations: prons, NoFwdflat: o.noFwdflat, KeepCMN: o.keepCMN, CMNWindow: o.cmnWindow, Args: strings.Fields(sargs), Search: o.search,
		BusySearch: o.busy, BusyAbove: o.busyAbove}
	fmt.Printf("Search setting: %s (when busy: %s); extra PocketSphinx options: %q\n\n", o.search, o.busy, sargs)
	if o.wer {
		if err := evalWER(ctx, o, base, corpus, audio); err != nil {
			return err
		}
	}
	if o.bench {
		cfg := base
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
		in[lm.Normalize(s)] = true
	}
	for _, u := range set {
		if in[lm.Normalize(u.Text)] == u.Paraphrase {
			return fmt.Errorf("test utterance %s (%q): paraphrase=%v but in domain text=%v", u.ID, u.Text, u.Paraphrase, !u.Paraphrase)
		}
	}
	return nil
}

type clip struct {
	u    sttest.Utterance
	pcm  []int16
	rate int
}

func synthAll(ctx context.Context, voices []sttest.Voice, set []sttest.Utterance) (map[string][]clip, error) {
	out := map[string][]clip{}
	for _, v := range voices {
		for _, u := range set {
			pcm, rate, err := sttest.Synth(ctx, v, u.Text)
			if err != nil {
				return nil, err
			}
			out[v.Name] = append(out[v.Name], clip{u, pcm, rate})
		}
	}
	return out, nil
}

// decode streams one clip in 20 ms frames (as fast as it decodes) and
// returns the transcript and how long Finish took.
func decode(ctx context.Context, tr pipeline.Transcriber, c clip) (string, time.Duration, error) {
	r, err := tr.Start(ctx, c.rate)
	if err != nil {
		return "", 0, err
	}
	defer r.Close()
	fr := c.rate / 50
	for i := 0; i < len(c.pcm); i += fr {
		if _, err := r.Write(ctx, c.pcm[i:min(i+fr, len(c.pcm))]); err != nil {
			return "", 0, err
		}
	}
	start := time.Now()
	text, err := r.Finish(ctx)
	return text, time.Since(start), err
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

func evalWER(ctx context.Context, o options, base sphinx.Config, corpus []string, audio map[string][]clip) error {
	type setting struct {
		name string
		cfg  sphinx.Config
	}
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
	fmt.Println("## Word error rate (lit: sentences in the domain text; para: paraphrases)")
	fmt.Println()
	header := "| LM |"
	sep := "|---|"
	for _, v := range o.voices {
		header += fmt.Sprintf(" %s (lit / para / all) |", v.Name)
		sep += "---|"
	}
	header += " all voices | RTF | finalise p50 / p99 |"
	sep += "---|---|---|"
	var rows []string
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, s := range settings {
		e, err := sphinx.New(ctx, s.cfg, corpus, log, nil)
		if err != nil {
			return err
		}
		row := "| " + s.name + " |"
		var total score
		var busy, secs float64
		var fin []time.Duration
		for _, v := range o.voices {
			var lit, para score
			for _, c := range audio[v.Name] {
				t0 := time.Now()
				hyp, f, err := decode(ctx, e, c)
				busy += time.Since(t0).Seconds()
				secs += float64(len(c.pcm)) / float64(c.rate)
				fin = append(fin, f)
				if err != nil {
					e.Close()
					return fmt.Errorf("%s %s: %w", v.Name, c.u.ID, err)
				}
				ref := lm.Normalize(c.u.Text)
				errs, n := sttest.WordErrors(ref, hyp)
				if c.u.Paraphrase {
					para.add(errs, n)
				} else {
					lit.add(errs, n)
				}
				total.add(errs, n)
				if o.verbose && errs > 0 {
					fmt.Fprintf(os.Stderr, "%s %s %s: %d errors\n  ref: %s\n  hyp: %s\n", s.name, v.Name, c.u.ID, errs, ref, hyp)
				}
			}
			all := score{lit.errs + para.errs, lit.words + para.words}
			row += fmt.Sprintf(" %s / %s / **%s** |", lit, para, all)
		}
		row += fmt.Sprintf(" %s | %.3f | %v / %v |", total, busy/secs, pct(fin, 50), pct(fin, 99))
		e.Close()
		rows = append(rows, row)
		if len(rows) == 1 {
			fmt.Println(header)
			fmt.Println(sep)
		}
		fmt.Println(row)
	}
	fmt.Println()
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
	e.Close()
	fmt.Println("| measure | value |")
	fmt.Println("|---|---|")
	fmt.Printf("| decoders warmed (%d, %d CPUs) | %v |\n", memDecoders, runtime.NumCPU(), warm.Round(10*time.Millisecond))
	fmt.Printf("| memory per decoder (RSS) | %.0f MB |\n", perDecoder)
	fmt.Printf("| real-time factor | %.3f (%d utterances, %.0f s of audio) |\n", busy/audioSecs, len(clips), audioSecs)
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

func pct(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := min(len(s)-1, (len(s)*p+99)/100-1)
	return s[max(0, i)].Round(time.Millisecond)
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
