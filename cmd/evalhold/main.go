// Command evalhold measures how server turns hold a pause after unfinished
// words (vad.Config.HoldMs, package turnwords) on real audio: caller
// questions of the domain's evaluation sets spoken by flite, each whole
// and split after a function word that leaves it unfinished (the one
// nearest its middle) by a pause of each -pauses, run through the voice activity
// detector and the endpointer with the embedded recogniser hearing each
// turn's audio as it streams, as a server turn's does. The recogniser is
// fed in step with the stream, so its partials are always current: what
// a lightly loaded server sees.
//
// It prints, per voice and hold: the share of split questions that came
// out as one turn, the share of whole questions held (false holds) and
// the delay that added to their turn's end, and the word error rate of
// the turns' transcripts against what was said; with -words, the last
// word of the partial at each pause past silenceMs, which the word list
// is chosen on (tuning set only).
//
//	go run ./cmd/evalhold -every 2 -holds 0,700,1000 -words  # tuning set: choose
//	go run ./cmd/evalhold -set eval/retrieval-spoken.yaml     # a set not used for choosing
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
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/voiced/voiced/internal/audio/resample"
	"github.com/voiced/voiced/internal/domain"
	"github.com/voiced/voiced/internal/pipeline"
	"github.com/voiced/voiced/internal/protocol"
	"github.com/voiced/voiced/internal/stages/stt/lm"
	"github.com/voiced/voiced/internal/stages/stt/sphinx"
	"github.com/voiced/voiced/internal/stages/stt/sttest"
	"github.com/voiced/voiced/internal/turnwords"
	"github.com/voiced/voiced/internal/vad"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "evalhold:", err)
		os.Exit(1)
	}
}

type options struct {
	set       string
	voices    []sttest.Voice
	pauses    []int
	holds     []int
	silenceMs int
	telephone bool
	every     int
	workers   int
	words     bool
	verbose   bool
}

func run() error {
	var o options
	var voices, pauses, holds string
	flag.StringVar(&o.set, "set", domain.TuningFile, "question set, a file of the domain ("+domain.TuningFile+" chooses the settings; never the held-out set)")
	flag.StringVar(&voices, "voices", "flite-slt,flite-kal", "voices to speak the questions")
	flag.StringVar(&pauses, "pauses", "600,900,1200", "pauses (ms) after the unfinished word of each split question")
	flag.StringVar(&holds, "holds", "0,"+strconv.Itoa(protocol.DefaultHoldMs), "holdMs values to compare (0: no hold, the behaviour before)")
	flag.IntVar(&o.silenceMs, "silence", vad.DefaultSilenceMs, "silenceMs")
	flag.BoolVar(&o.telephone, "telephone", false, "telephone audio: 8 kHz through G.711 mu-law")
	flag.IntVar(&o.every, "every", 1, "take every nth question of the set")
	flag.IntVar(&o.workers, "workers", 2, "questions decoded at once")
	flag.BoolVar(&o.words, "words", false, "count the last word of the partial at each pause past silenceMs")
	flag.BoolVar(&o.verbose, "v", false, "print every stream's turns")
	flag.Parse()
	if strings.Contains(o.set, "heldout") {
		return errors.New("the held-out set is not for this tool")
	}
	var err error
	if o.voices, err = sttest.ParseVoices(voices); err != nil {
		return err
	}
	if o.pauses, err = ints(pauses); err != nil {
		return err
	}
	if o.holds, err = ints(holds); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	d, err := domain.LoadOrDefault("")
	if err != nil {
		return err
	}
	cases, err := d.RetrievalEvalFile(o.set)
	if err != nil {
		return err
	}
	var qs []string
	for i, c := range cases {
		if i%o.every == 0 {
			qs = append(qs, lm.Normalize(c.Question))
		}
	}
	cfg := sphinx.Config{Decoders: o.workers}
	if cfg.Pronunciations, cfg.PronunciationsData, err = d.PronunciationsSource(); err != nil {
		return err
	}
	eng, err := sphinx.New(ctx, cfg, d.CorpusSentences(), slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	if err != nil {
		return err
	}
	defer eng.Close()

	rate := 16000
	if o.telephone {
		rate = 8000
	}
	fmt.Printf("Set %s: %d questions (every %d), %d split after an unfinished word; silenceMs %d; %d Hz%s.\n\n",
		o.set, len(qs), o.every, countSplit(qs), o.silenceMs, rate, map[bool]string{true: " mu-law", false: ""}[o.telephone])
	fmt.Println("| voice | holdMs | split: one turn | whole: held | added delay, held (mean) | WER whole | WER split |")
	fmt.Println("|---|---|---|---|---|---|---|")
	lastWords := map[string]*[2]int{} // word -> [whole, split] pauses past silenceMs ending with it
	var byPause []string
	for _, v := range o.voices {
		for _, hold := range o.holds {
			var t tally
			var mu sync.Mutex
			err := parallel(ctx, o.workers, len(qs), func(i int) error {
				r, err := evalQuestion(ctx, o, eng, v, rate, hold, qs[i])
				if err != nil {
					return err
				}
				mu.Lock()
				defer mu.Unlock()
				t.add(r)
				if o.words && hold == o.holds[len(o.holds)-1] {
					for _, w := range r.wholeLast {
						count(lastWords, w)[0]++
					}
					for _, w := range r.splitLast {
						count(lastWords, w)[1]++
					}
				}
				return nil
			})
			if err != nil {
				return err
			}
			fmt.Printf("| %s | %d | %s | %s | %s | %s | %s |\n", v.Name, hold,
				share(t.splitOne, t.splits), share(t.wholeHeld, t.wholes), meanMs(t.heldDelay, t.wholeHeld),
				wer(t.wholeErrs, t.wholeWords), wer(t.splitErrs, t.splitWords))
			row := fmt.Sprintf("| %s | %d |", v.Name, hold)
			for _, p := range o.pauses {
				row += " " + share(t.byPause[p][0], t.byPause[p][1]) + " |"
			}
			byPause = append(byPause, row)
		}
	}
	fmt.Println("\nSplit questions that came out as one turn, by pause:")
	fmt.Println()
	head, rule := "| voice | holdMs |", "|---|---|"
	for _, p := range o.pauses {
		head += fmt.Sprintf(" %d ms |", p)
		rule += "---|"
	}
	fmt.Println(head)
	fmt.Println(rule)
	for _, row := range byPause {
		fmt.Println(row)
	}
	if o.words {
		printWords(lastWords)
	}
	return nil
}

// result is one question's outcome at one hold: whole, then split by
// each pause.
type result struct {
	whole     stream
	splits    map[int]stream // by pause
	wholeLast []string       // last words of the partial at pauses past silenceMs
	splitLast []string
}

type tally struct {
	wholes, wholeHeld, splits, splitOne int
	heldDelay                           float64 // ms past silenceMs, summed over held whole questions
	wholeErrs, wholeWords               int
	splitErrs, splitWords               int
	byPause                             map[int][2]int // one turn, splits
}

func (t *tally) add(r result) {
	t.wholes++
	if r.whole.held {
		t.wholeHeld++
		t.heldDelay += r.whole.delayMs
	}
	t.wholeErrs += r.whole.errs
	t.wholeWords += r.whole.words
	if t.byPause == nil {
		t.byPause = map[int][2]int{}
	}
	for p, s := range r.splits {
		t.splits++
		bp := t.byPause[p]
		bp[1]++
		if s.turns == 1 {
			t.splitOne++
			bp[0]++
		}
		t.byPause[p] = bp
		t.splitErrs += s.errs
		t.splitWords += s.words
	}
}

// splitAfter are the words a question is split after: function words
// that, mid-sentence, leave it unfinished (articles, possessives,
// prepositions, conjunctions, pronouns and auxiliaries before their verb,
// fillers). The set is broader than turnwords' list and fixed apart from
// it, so that lists can be compared on the same splits.
var splitAfter = map[string]bool{}

func init() {
	for _, w := range strings.Fields(`a an the my your our their his its this
		of to for with from into about at on in by
		and or but because if so that when
		i you we it is are was were can do does did will would could have has
		um uh er`) {
		splitAfter[w] = true
	}
}

// splitPoint returns the number of words of the first part when q is
// split after a word of splitAfter, the one nearest its middle with at
// least one word before and two after it; 0 when it has none.
func splitPoint(q string) int {
	ws := strings.Fields(q)
	best := 0
	for i := 1; i+3 <= len(ws); i++ { // ws[i] ends the first part
		if splitAfter[ws[i]] && (best == 0 || abs(2*(i+1)-len(ws)) < abs(2*best-len(ws))) {
			best = i + 1
		}
	}
	return best
}

func countSplit(qs []string) int {
	n := 0
	for _, q := range qs {
		if splitPoint(q) > 0 {
			n++
		}
	}
	return n
}

// evalQuestion speaks q whole and split, and runs each stream.
func evalQuestion(ctx context.Context, o options, eng *sphinx.Engine, v sttest.Voice, rate, hold int, q string) (result, error) {
	r := result{splits: map[int]stream{}}
	whole, err := speak(ctx, v, rate, q)
	if err != nil {
		return r, err
	}
	lead, tail := silence(rate, 500), silence(rate, o.silenceMs+hold+1500)
	r.whole, err = runStream(ctx, o, eng, rate, hold, q, cat(lead, whole, tail))
	if err != nil {
		return r, err
	}
	r.wholeLast = r.whole.lastWords
	n := splitPoint(q)
	if n == 0 {
		return r, nil
	}
	ws := strings.Fields(q)
	first, err := speak(ctx, v, rate, strings.Join(ws[:n], " "))
	if err != nil {
		return r, err
	}
	second, err := speak(ctx, v, rate, strings.Join(ws[n:], " "))
	if err != nil {
		return r, err
	}
	for _, p := range o.pauses {
		s, err := runStream(ctx, o, eng, rate, hold, q, cat(lead, first, silence(rate, p), second, tail))
		if err != nil {
			return r, err
		}
		r.splits[p] = s
		r.splitLast = append(r.splitLast, s.lastWords...)
	}
	return r, nil
}

// speak synthesises text at rate, trimmed to where its sound starts and
// ends, so that the pauses are the ones the stream is built with.
func speak(ctx context.Context, v sttest.Voice, rate int, text string) ([]int16, error) {
	pcm, r, err := sttest.Synth(ctx, v, text)
	if err != nil {
		return nil, err
	}
	if r != 16000 {
		rs, err := resample.New(r, 16000)
		if err != nil {
			return nil, err
		}
		pcm = rs.Flush(rs.Process(nil, pcm))
	}
	loud := func(s int16) bool { return s > 300 || s < -300 }
	start, end := 0, len(pcm)
	for start < end && !loud(pcm[start]) {
		start++
	}
	for end > start && !loud(pcm[end-1]) {
		end--
	}
	pcm = pcm[start:end]
	if rate == 8000 {
		pcm, _, err = sttest.Telephone(pcm, 16000)
	}
	return pcm, err
}

func silence(rate, ms int) []int16 { return make([]int16, rate*ms/1000) }

func cat(parts ...[]int16) []int16 {
	var out []int16
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// stream is what one stream's turns came to.
type stream struct {
	turns       int
	held        bool    // a turn was held
	delayMs     float64 // how much later than silenceMs after its speech the last turn ended
	errs, words int     // word errors of the turns' transcripts, joined, against what was said
	lastWords   []string
	texts       []string
}

// heard is the eval's vad.Words: the recogniser is fed as the endpointer
// hands out audio, in step, so the partial is always current.
type heard struct {
	vad.Heard
	partial string
	asked   map[int64]bool // ends of speech asked about
	last    []string
}

func (h *heard) Unfinished(end int64) bool {
	if !h.asked[end] {
		h.asked[end] = true
		ws := strings.Fields(h.partial)
		if len(ws) > 0 {
			h.last = append(h.last, ws[len(ws)-1])
		}
	}
	return h.Heard.Unfinished(end)
}

// runStream runs pcm through the detector, the endpointer and the
// recogniser, and scores the turns against ref.
func runStream(ctx context.Context, o options, eng *sphinx.Engine, rate, hold int, ref string, pcm []int16) (stream, error) {
	var s stream
	det, err := vad.New(rate, vad.Options{})
	if err != nil {
		return s, err
	}
	ep, err := vad.NewEndpointer(det, rate, vad.Config{SilenceMs: o.silenceMs, HoldMs: hold})
	if err != nil {
		det.Close()
		return s, err
	}
	defer ep.Close()
	h := &heard{asked: map[int64]bool{}}
	ep.SetWords(h)
	var (
		rec      pipeline.Coverer
		write    func([]int16) error
		finish   func() (string, error)
		closeRec func()
		from     int64
	)
	defer func() {
		if closeRec != nil {
			closeRec()
		}
	}()
	fr := rate / 50
	for i := 0; i < len(pcm); i += fr {
		evs, err := ep.Write(pcm[i:min(i+fr, len(pcm))])
		if err != nil {
			return s, err
		}
		for _, ev := range evs {
			switch ev.Kind {
			case vad.SpeechStarted:
				r, err := eng.Start(ctx, rate)
				if err != nil {
					return s, err
				}
				rec, from, h.Heard = r.(pipeline.Coverer), ev.From, vad.Heard{}
				closeRec = func() { r.Close() }
				write = func(a []int16) error {
					p, err := r.Write(ctx, a)
					if err != nil {
						return err
					}
					h.partial = p
					h.Set(from+rec.Covered(), turnwords.Unfinished(p))
					return nil
				}
				finish = func() (string, error) { return r.Finish(ctx) }
				if err := write(ev.Audio); err != nil {
					return s, err
				}
			case vad.TurnAudio:
				if err := write(ev.Audio); err != nil {
					return s, err
				}
			case vad.SpeechStopped:
				text, err := finish()
				if err != nil {
					return s, err
				}
				closeRec()
				closeRec = nil
				s.turns++
				s.texts = append(s.texts, text)
				s.held = s.held || ev.Holds > 0
				s.delayMs = float64(ev.At-ev.Pos)*1000/float64(rate) - float64(o.silenceMs)
			}
		}
	}
	s.errs, s.words = sttest.WordErrors(ref, strings.Join(s.texts, " "))
	s.lastWords = h.last
	if o.verbose {
		fmt.Fprintf(os.Stderr, "hold %d: %q -> %q (last words %v)\n", hold, ref, s.texts, h.last)
	}
	return s, nil
}

// parallel runs fn(0..n-1) on workers goroutines and returns the first
// error.
func parallel(ctx context.Context, workers, n int, fn func(i int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	next := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range next {
				if err := fn(i); err != nil {
					cancel(err)
				}
			}
		})
	}
feed:
	for i := range n {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return ctx.Err()
}

func count(m map[string]*[2]int, w string) *[2]int {
	if m[w] == nil {
		m[w] = new([2]int)
	}
	return m[w]
}

func printWords(m map[string]*[2]int) {
	fmt.Println("\nLast word of the partial at each pause past silenceMs (the last hold; * on the list):")
	fmt.Println()
	fmt.Println("| word | whole questions | split questions |")
	fmt.Println("|---|---|---|")
	ws := make([]string, 0, len(m))
	for w := range m {
		ws = append(ws, w)
	}
	sort.Slice(ws, func(i, j int) bool {
		a, b := m[ws[i]], m[ws[j]]
		if a[0]+a[1] != b[0]+b[1] {
			return a[0]+a[1] > b[0]+b[1]
		}
		return ws[i] < ws[j]
	})
	for _, w := range ws {
		mark := ""
		if turnwords.Unfinished(w) {
			mark = " *"
		}
		fmt.Printf("| %s%s | %d | %d |\n", w, mark, m[w][0], m[w][1])
	}
}

func ints(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return nil, fmt.Errorf("%q: %w", s, err)
		}
		out = append(out, n)
	}
	return out, nil
}

func abs(x int) int { return max(x, -x) }

func share(n, of int) string {
	if of == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f%% (%d/%d)", 100*float64(n)/float64(of), n, of)
}

func meanMs(sum float64, n int) string {
	if n == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f ms", sum/float64(n))
}

func wer(errs, words int) string {
	if words == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f%% (%d/%d)", 100*float64(errs)/float64(words), errs, words)
}
