// Command evalvad measures server-side turn detection (internal/vad) on
// the project's test utterances (internal/stages/stt/sttest), synthesised
// with flite and espeak-ng, joined into one continuous stream per voice
// with 1-3 s gaps and mixed with noise made by sox (white, pink and brown
// at several levels), clicks, or a second quiet talker. It reports missed
// and false turns, where turns were judged to start and end against where
// the speech really does, and the time from the true end of speech to the
// end-of-turn decision; false turns in five minutes of noise alone; and,
// with -wer, the word error rate of the embedded recogniser on the
// detected turns beside the same utterances sent one by one. It prints
// Markdown tables for docs/benchmarks.md.
//
//	go run ./cmd/evalvad                        # the default detector, every condition
//	go run ./cmd/evalvad -modes 1,2,3,4 -margins -1,3,6,10 -wer=false   # choose the defaults
//	go run ./cmd/evalvad -rate 8000 -mulaw      # telephone audio: 8 kHz G.711 mu-law
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/voiced/voiced/internal/stages/stt/sttest"
	"github.com/voiced/voiced/internal/vad"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "evalvad:", err)
		os.Exit(1)
	}
}

// speechDBFS is the level every utterance is set to (RMS over its active
// frames): a loud-ish close-talking level, so the noise levels below mean
// signal-to-noise ratios of 30, 20 and 10 dB.
const speechDBFS = -20.0

type options struct {
	rate      int
	mulaw     bool
	voices    []sttest.Voice
	settings  []setting
	cfg       vad.Config
	conds     []string
	noiseMins float64
	wer       bool
	werConds  []string
	seed      uint64
	verbose   bool
}

// setting is one detector configuration under test.
type setting struct {
	mode     vad.Mode
	margin   float64
	fg       float64
	askAll   bool
	smoothed bool
}

func (s setting) String() string {
	g := "gate off"
	if s.margin >= 0 {
		g = fmt.Sprintf("gate %g dB", s.margin)
	}
	if s.fg >= 0 {
		g += fmt.Sprintf(", foreground %g dB", s.fg)
	} else {
		g += ", no foreground test"
	}
	if s.askAll {
		g += ", GMM on every frame above the gate"
	}
	sm := ""
	if s.smoothed {
		sm = ", WebRTC hangover"
	}
	return fmt.Sprintf("WebRTC mode %d, %s%s", s.mode-vad.ModeQuality, g, sm)
}

func run() error {
	var (
		o                                                            options
		voices, modes, margins, fgs, conds, werConds, smooth, askAll string
	)
	flag.IntVar(&o.rate, "rate", 16000, "stream sample rate: 16000 or 8000")
	flag.BoolVar(&o.mulaw, "mulaw", false, "pass the stream through G.711 mu-law (with -rate 8000: telephone audio)")
	flag.StringVar(&voices, "voices", "flite-slt,flite-kal,espeak-en-us,espeak-en", "voices to speak the utterances")
	flag.StringVar(&modes, "modes", strconv.Itoa(int(vad.DefaultMode)), "detector modes to try, vad.Mode: 1 (quality, WebRTC mode 0) .. 4 (very aggressive, WebRTC mode 3)")
	flag.StringVar(&margins, "margins", strconv.FormatFloat(vad.DefaultGateMarginDB, 'g', -1, 64), "energy gate margins (dB) to try; negative: gate off")
	flag.StringVar(&fgs, "foreground", strconv.FormatFloat(vad.DefaultGateForegroundDB, 'g', -1, 64), "gate foreground margins (dB) to try; negative: off")
	flag.StringVar(&askAll, "ask-every-frame", "false", "run the GMM on every frame the gate passes, without the sure-speech shortcut: false, true or both")
	flag.StringVar(&smooth, "smoothed", "false", "also try WebRTC's own hangover: false, true or both")
	flag.IntVar(&o.cfg.SilenceMs, "silence", vad.DefaultSilenceMs, "silenceMs")
	flag.IntVar(&o.cfg.PrefixMs, "prefix", vad.DefaultPrefixMs, "prefixMs")
	flag.IntVar(&o.cfg.MinSpeechMs, "min-speech", vad.DefaultMinSpeechMs, "minSpeechMs")
	flag.StringVar(&conds, "conditions", strings.Join(conditionNames(), ","), "noise conditions")
	flag.Float64Var(&o.noiseMins, "noise-minutes", 5, "minutes of noise alone per noise type for false turns")
	flag.BoolVar(&o.wer, "wer", true, "measure word error rate on detected turns and on the utterances one by one")
	flag.StringVar(&werConds, "wer-conditions", "clean,white-40", "conditions for -wer")
	flag.Uint64Var(&o.seed, "seed", 1, "seed for gaps, clicks and noise offsets")
	flag.BoolVar(&o.verbose, "v", false, "print every miss, false turn and recognition error")
	flag.Parse()

	if o.rate != 16000 && o.rate != 8000 {
		return fmt.Errorf("-rate %d: want 16000 or 8000", o.rate)
	}
	if _, err := o.cfg.WithDefaults(); err != nil {
		return err
	}
	var err error
	if o.voices, err = sttest.ParseVoices(voices); err != nil {
		return err
	}
	if _, err := exec.LookPath("sox"); err != nil {
		return errors.New("sox not installed (apt-get install sox)")
	}
	bools := map[string][]bool{"false": {false}, "true": {true}, "both": {false, true}}
	smooths, asks := bools[smooth], bools[askAll]
	if smooths == nil || asks == nil {
		return fmt.Errorf("-smoothed %q, -ask-every-frame %q: want false, true or both", smooth, askAll)
	}
	for _, m := range strings.Split(modes, ",") {
		mode, err := strconv.Atoi(strings.TrimSpace(m))
		if err != nil || mode < 1 || mode > 4 {
			return fmt.Errorf("bad mode %q (want 1..4)", m)
		}
		for _, g := range strings.Split(margins, ",") {
			margin, err := strconv.ParseFloat(strings.TrimSpace(g), 64)
			if err != nil {
				return fmt.Errorf("bad margin %q", g)
			}
			for _, f := range strings.Split(fgs, ",") {
				fg, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
				if err != nil {
					return fmt.Errorf("bad foreground margin %q", f)
				}
				for _, s := range smooths {
					for _, a := range asks {
						o.settings = append(o.settings, setting{vad.Mode(mode), margin, fg, a, s})
					}
				}
			}
		}
	}
	o.conds = strings.Split(conds, ",")
	o.werConds = strings.Split(werConds, ",")
	for _, c := range append(slices.Clone(o.conds), o.werConds...) {
		if _, ok := conditions[c]; !ok {
			return fmt.Errorf("unknown condition %q (have %s)", c, strings.Join(conditionNames(), ", "))
		}
	}

	// SIGTERM too (timeout(1), kill): the deferred clean-up of temporary
	// files runs whichever signal stops the run.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	enc := "PCM16"
	if o.mulaw {
		enc = "G.711 mu-law"
	}
	fmt.Printf("evalvad %s, %d CPUs, %s/%s: %d Hz %s, speech at %.0f dBFS, silenceMs %d, prefixMs %d, minSpeechMs %d\n\n",
		time.Now().UTC().Format("2006-01-02 15:04 MST"), runtime.NumCPU(), runtime.GOOS, runtime.GOARCH,
		o.rate, enc, speechDBFS, o.cfg.SilenceMs, o.cfg.PrefixMs, o.cfg.MinSpeechMs)

	tmp, err := os.MkdirTemp("", "evalvad-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	src := &sources{dir: tmp, rate: 16000, noise: map[string][]int16{}}
	streams, err := buildStreams(ctx, o, src)
	if err != nil {
		return err
	}
	for _, s := range o.settings {
		if err := evalTurns(ctx, o, s, streams, src); err != nil {
			return err
		}
		if err := evalNoiseOnly(ctx, o, s, src); err != nil {
			return err
		}
	}
	if o.wer {
		return evalWER(ctx, o, o.settings[0], streams, src)
	}
	return nil
}
