// Command evalcalls measures a running voiced end to end, as a caller
// meets it: each question of a caller question set is spoken by a
// synthetic voice and streamed to the server over the protocol in 20 ms
// frames, in real time, on a session of its own, with a deadline on every
// frame; the request's terminal message is then scored. It reports, per
// voice, the word error rate of the result's transcript, the share of
// results with the labelled intent, the share of in-scope answers whose
// first source is an expected article, the out-of-scope, greeting and
// goodbye answers that cite a passage, and how the requests ended
// (errors, degradations, terminals after their deadline or never, and
// the time from the final frame to the terminal).
//
// The evaluation commands (evalstt, evalintent, evalretrieval) measure
// the engines in process on the domain's own sets; evalcalls measures
// what a client gets, on any set in the domain's format, such as one
// written for a measurement and kept outside the repository:
//
//	make run &                      # voiced with its defaults
//	go run ./cmd/evalcalls -addr 127.0.0.1:8080 -set /path/to/callers.yaml
//
// The set's format is eval/heldout.yaml's (docs/domain.md): question,
// intent, and expect (the articles that answer it; none for out_of_scope,
// greeting and goodbye). Its intents and articles are checked against
// -domain (default: the embedded help-desk domain), which should be the
// server's. Without -set it measures the domain's held-out caller
// questions.
//
// The bearer token for a server that needs one is read from
// VOICED_TOKEN, never from a flag.
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/voiced/voiced/client"
	"github.com/voiced/voiced/internal/domain"
	"github.com/voiced/voiced/internal/stages/stt/lm"
	"github.com/voiced/voiced/internal/stages/stt/sttest"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout)
	stop()
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "evalcalls:", err)
		os.Exit(1)
	}
}

// options are the command's settings.
type options struct {
	url     string
	token   string
	voices  []sttest.Voice
	frame   time.Duration
	budget  time.Duration
	grace   time.Duration // how long after its deadline a terminal is waited for
	verbose bool
	// synth speaks a question; sttest.Synth, or a stand-in in tests.
	synth func(ctx context.Context, v sttest.Voice, text string) ([]int16, int, error)
}

func run(ctx context.Context, args []string, out io.Writer) error {
	o, dir, setFile, err := parseFlags(args)
	if err != nil {
		return err
	}
	d, err := domain.LoadOrDefault(dir)
	if err != nil {
		return err
	}
	name, cases, err := loadSet(d, setFile)
	if err != nil {
		return err
	}
	return evaluate(ctx, o, name, cases, out)
}

// parseFlags returns the options, the domain folder and the set's path
// of args; it checks everything it can without the network.
func parseFlags(args []string) (o options, dir, setFile string, err error) {
	flags := flag.NewFlagSet("evalcalls", flag.ContinueOnError)
	addr := flags.String("addr", "127.0.0.1:8080", "voiced's host:port")
	path := flags.String("path", "/v1/session", "the session endpoint")
	flags.StringVar(&dir, "domain", "", "domain folder the set's intents and articles are checked against: the server's (default: the embedded help-desk domain)")
	flags.StringVar(&setFile, "set", "", "caller question set in eval/heldout.yaml's format (default: the domain's "+domain.HeldOutFile+")")
	voices := flags.String("voices", "flite-slt,flite-kal", "voices that speak the questions")
	o = options{token: os.Getenv("VOICED_TOKEN"), synth: sttest.Synth}
	flags.DurationVar(&o.frame, "frame", 20*time.Millisecond, "audio per frame, sent in real time")
	flags.DurationVar(&o.budget, "budget", 0, "deadline after each frame, at most the server's maxBudgetMs (0: maxBudgetMs)")
	flags.DurationVar(&o.grace, "grace", 5*time.Second, "how long after its deadline a terminal is waited for before the call counts as having none")
	flags.BoolVar(&o.verbose, "v", false, "print every call: transcript, intent, sources and how it ended")
	if err := flags.Parse(args); err != nil {
		return o, "", "", err
	}
	switch {
	case flags.NArg() > 0:
		return o, "", "", fmt.Errorf("unexpected arguments %q (the set is -set FILE)", flags.Args())
	case o.frame < 10*time.Millisecond || o.frame > time.Second:
		return o, "", "", fmt.Errorf("-frame %s: want 10ms to 1s", o.frame)
	case o.budget < 0 || o.grace < 0:
		return o, "", "", errors.New("-budget and -grace must not be negative")
	}
	// The protocol runs over ws:// here: a token goes only to loopback.
	host, _, err := net.SplitHostPort(*addr)
	if err != nil {
		return o, "", "", fmt.Errorf("-addr %q: %w", *addr, err)
	}
	if ip := net.ParseIP(host); o.token != "" && host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return o, "", "", fmt.Errorf("-addr %s: VOICED_TOKEN is sent only to a loopback address (ws:// is not encrypted)", *addr)
	}
	o.url = "ws://" + *addr + *path
	if o.voices, err = sttest.ParseVoices(*voices); err != nil {
		return o, "", "", err
	}
	return o, dir, setFile, nil
}

// loadSet reads the caller question set at path, or the domain's held-out
// set when path is empty, checked against d.
func loadSet(d *domain.Domain, path string) (string, []domain.RetrievalCase, error) {
	if path == "" {
		cases, err := d.RetrievalEvalFile(domain.HeldOutFile)
		return domain.HeldOutFile, cases, err
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return "", nil, err
	}
	cases, err := d.ParseRetrievalEval(path, data)
	return path, cases, err
}

// evaluate speaks every case with every voice, one call at a time, and
// prints the figures of each voice.
func evaluate(ctx context.Context, o options, name string, cases []domain.RetrievalCase, out io.Writer) error {
	inScope := 0
	for _, c := range cases {
		if len(c.Expect) > 0 {
			inScope++
		}
	}
	fmt.Fprintf(out, "%s: %d questions (%d in scope), one session each, %s frames in real time, deadline %s after each frame\n\n",
		name, len(cases), inScope, o.frame, budgetName(o.budget))
	var scores []*score
	err := func() error {
		for _, v := range o.voices {
			s := &score{voice: v.Name}
			scores = append(scores, s)
			for i, c := range cases {
				pcm, rate, err := o.synth(ctx, v, c.Question)
				if err != nil {
					return fmt.Errorf("%s: %q: %w", v.Name, c.Question, err)
				}
				oc, err := call(ctx, o, fmt.Sprintf("%s-%03d", v.Name, i+1), pcm, rate)
				if err != nil {
					return fmt.Errorf("%s: %q: %w", v.Name, c.Question, err)
				}
				s.add(c, oc)
				if o.verbose {
					fmt.Fprintln(out, describe(v.Name, c, oc))
				}
			}
		}
		return nil
	}()
	if err != nil && (len(scores) == 0 || scores[0].calls == 0) {
		return err
	}
	// An interrupted or failed run still reports the calls it made.
	if o.verbose {
		fmt.Fprintln(out)
	}
	printTable(out, scores)
	if err != nil {
		return fmt.Errorf("stopped early, after the calls above: %w", err)
	}
	return nil
}

func budgetName(d time.Duration) string {
	if d == 0 {
		return "the server's maxBudgetMs"
	}
	return d.String()
}

// outcome is how one call ended, as the client saw it.
type outcome struct {
	transcript string
	intent     string
	articles   []string // the result's sources' articles, in order
	code       string   // the error's code; "" for a result
	degraded   []string
	missing    bool          // no terminal came, even well after the deadline
	lost       bool          // the connection dropped before the terminal
	extra      int           // terminals after the first, seen before the session closed
	late       bool          // the terminal was read after the deadline
	latency    time.Duration // final frame sent -> terminal read
}

// call streams pcm (at rate Hz) as one request on a session of its own,
// frame by frame in real time, and waits for its terminal message. A
// broken promise (no terminal, a second one, a dropped connection) is an
// outcome, counted; only a session that cannot be opened, or ctx ending,
// stops the run.
func call(ctx context.Context, o options, id string, pcm []int16, rate int) (outcome, error) {
	var extra atomic.Int32 // terminals for the request after its first
	c, err := client.Dial(ctx, client.Config{URL: o.url, Token: o.token, KeepAlive: -1,
		// The server is measured, not worked around: a dropped connection
		// counts, rather than being resumed.
		Reconnect: client.Reconnect{Disabled: true},
		OnUnrouted: func(ev client.Event) {
			if ev.RequestID == id && ev.Terminal() {
				extra.Add(1)
			}
		}})
	if err != nil {
		return outcome{}, err
	}
	defer c.Close()
	req, err := c.Open(id, nil)
	if err != nil {
		return outcome{}, err
	}
	deadlineAt, lastSent, err := stream(ctx, c, req, pcm, rate, o.frame, budget(time.Duration(c.Ready().MaxBudgetMs)*time.Millisecond, o.budget))
	if err != nil {
		if ctx.Err() != nil {
			return outcome{}, context.Cause(ctx)
		}
		return outcome{lost: true}, nil
	}
	deadline := c.LocalTime(deadlineAt)
	term, broken, err := await(ctx, c, req, deadline, o.grace)
	if err != nil || broken.missing || broken.lost {
		return broken, err
	}
	oc, err := fromTerminal(term)
	if err != nil {
		return outcome{}, err
	}
	oc.late, oc.latency = term.At.After(deadline), term.At.Sub(lastSent)
	// A second terminal the server sent with or soon after the first has
	// been read once a ping sent now is answered.
	if caughtUp(ctx, c, o.grace) == nil {
		oc.extra = int(extra.Load())
	}
	return oc, nil
}

// defaultBudget is voiced's end-to-end default, for a server that offers
// no maxBudgetMs.
const defaultBudget = 1700 * time.Millisecond

// budget is the deadline each frame asks for: want (0: the most the
// server grants), but no more than most, its maxBudgetMs, since the
// server ends a request by the final frame's arrival plus maxBudgetMs
// whatever deadlineAt asks.
func budget(most, want time.Duration) time.Duration {
	switch {
	case most <= 0:
		return cmp.Or(want, defaultBudget)
	case want > 0:
		return min(most, want)
	}
	return most
}

// await waits for req's terminal until grace after its deadline. When
// none has come, it counts the request as missing only once a ping's pong
// shows that everything the server sent before was read (a client
// starved of CPU reads late). broken reports a missing terminal or a
// lost connection; err, only ctx ending.
func await(ctx context.Context, c *client.Client, req *client.Request, deadline time.Time, grace time.Duration) (term client.Event, broken outcome, err error) {
	wctx, cancel := context.WithDeadline(ctx, deadline.Add(grace))
	defer cancel()
	term, err = req.Wait(wctx)
	if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil && caughtUp(ctx, c, grace) == nil {
		select {
		case <-req.Done():
			term, err = req.Wait(ctx)
		default:
		}
	}
	switch {
	case err == nil:
		return term, outcome{}, nil
	case ctx.Err() != nil:
		return term, outcome{}, context.Cause(ctx)
	case errors.Is(err, context.DeadlineExceeded):
		return term, outcome{missing: true}, nil
	}
	return term, outcome{lost: true}, nil // ErrConnectionLost
}

// fromTerminal is what a terminal message says: an error's code, or the
// result's transcript, intent, sources and degradations.
func fromTerminal(term client.Event) (outcome, error) {
	if e, ok := term.Error(); ok {
		return outcome{code: string(e.Code)}, nil
	}
	var res client.Result
	if err := term.Decode(&res); err != nil {
		return outcome{}, fmt.Errorf("result: %w", err)
	}
	oc := outcome{transcript: res.Transcript, degraded: res.Degradation}
	if res.Intent != nil {
		oc.intent = res.Intent.Name
	}
	for _, s := range res.Sources {
		oc.articles = append(oc.articles, s.Article)
	}
	return oc, nil
}

// caughtUp waits, at most d, until the server has answered a ping sent
// now: by then every message it sent before has been read.
func caughtUp(ctx context.Context, c *client.Client, d time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	return c.Sync(ctx)
}

// stream sends pcm in frames of frame's length, one per frame's length as
// a microphone would, each with the deadline budget after it, the last
// one marked final. It returns the last frame's deadline (server clock)
// and when that frame was sent; a request the server ended early (refused
// at its first frame) stops the stream there.
func stream(ctx context.Context, c *client.Client, req *client.Request, pcm []int16, rate int, frame, budget time.Duration) (int64, time.Time, error) {
	n := max(1, int(int64(rate)*int64(frame)/int64(time.Second)))
	tick := time.NewTicker(frame)
	defer tick.Stop()
	var (
		deadlineAt int64
		sent       time.Time
	)
	for {
		k := min(n, len(pcm))
		d := c.DeadlineIn(budget)
		err := req.Send(ctx, client.Frame{PCM: pcm[:k], Final: k == len(pcm), SampleRate: rate, DeadlineAt: d})
		if errors.Is(err, client.ErrRequestEnded) && !sent.IsZero() {
			return deadlineAt, sent, nil
		}
		if err != nil {
			return 0, time.Time{}, err
		}
		deadlineAt, sent, pcm = d, time.Now(), pcm[k:]
		if len(pcm) == 0 {
			return deadlineAt, sent, nil
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return 0, time.Time{}, ctx.Err()
		}
	}
}

// score is one voice's tally.
type score struct {
	voice                string
	calls                int
	words, wordErrs      int
	intentRight          int
	inScope, firstGood   int
	unanswerable, citing int
	errors               map[string]int
	degraded, late       int
	missing, lost, extra int
	latencies            []time.Duration
}

// add counts one call: c is the question, oc how its call ended.
func (s *score) add(c domain.RetrievalCase, oc outcome) {
	s.calls++
	errs, words := sttest.WordErrors(lm.Scored(c.Question), lm.Scored(oc.transcript))
	s.wordErrs += errs
	s.words += words
	if oc.code == "" && oc.intent == c.Intent {
		s.intentRight++
	}
	if len(c.Expect) > 0 {
		s.inScope++
		if len(oc.articles) > 0 && slices.Contains(c.Expect, oc.articles[0]) {
			s.firstGood++
		}
	} else {
		s.unanswerable++
		if len(oc.articles) > 0 {
			s.citing++
		}
	}
	if oc.code != "" {
		if s.errors == nil {
			s.errors = map[string]int{}
		}
		s.errors[oc.code]++
	}
	if len(oc.degraded) > 0 {
		s.degraded++
	}
	if oc.late {
		s.late++
	}
	s.extra += oc.extra
	if oc.missing {
		s.missing++
	}
	if oc.lost {
		s.lost++
	}
	if oc.missing || oc.lost {
		return // no terminal, no latency
	}
	s.latencies = append(s.latencies, oc.latency)
}

func printTable(out io.Writer, scores []*score) {
	fmt.Fprintln(out, "| voice | calls | word errors | intent | first source an expected article | out of scope, greeting, goodbye citing a passage | errors | degraded | late | no terminal | connection lost | extra terminals | final frame -> terminal p50 / p99 / max |")
	fmt.Fprintln(out, "|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, s := range scores {
		slices.Sort(s.latencies)
		fmt.Fprintf(out, "| %s | %d | %s (%d/%d) | %s (%d/%d) | %s (%d/%d) | %d/%d | %s | %d | %d | %d | %d | %d | %s / %s / %s |\n",
			s.voice, s.calls,
			pct(s.wordErrs, s.words), s.wordErrs, s.words,
			pct(s.intentRight, s.calls), s.intentRight, s.calls,
			pct(s.firstGood, s.inScope), s.firstGood, s.inScope,
			s.citing, s.unanswerable, errorsName(s.errors), s.degraded, s.late, s.missing, s.lost, s.extra,
			quantile(s.latencies, 0.5), quantile(s.latencies, 0.99), quantile(s.latencies, 1))
	}
}

func pct(n, of int) string {
	if of == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", 100*float64(n)/float64(of))
}

// quantile of sorted durations, rounded for the table; "-" when none.
func quantile(d []time.Duration, q float64) string {
	if len(d) == 0 {
		return "-"
	}
	return d[int(q*float64(len(d)-1))].Round(time.Millisecond).String()
}

func errorsName(m map[string]int) string {
	if len(m) == 0 {
		return "0"
	}
	var parts []string
	for code, n := range m {
		parts = append(parts, fmt.Sprintf("%s %d", code, n))
	}
	slices.Sort(parts)
	return strings.Join(parts, ", ")
}

// describe is the -v line of one call.
func describe(voice string, c domain.RetrievalCase, oc outcome) string {
	end := "result"
	if oc.code != "" {
		end = "error " + oc.code
	}
	if len(oc.degraded) > 0 {
		end += " degraded " + strings.Join(oc.degraded, ",")
	}
	if oc.late {
		end += " LATE"
	}
	switch {
	case oc.missing:
		return fmt.Sprintf("%s %q: NO TERMINAL", voice, c.Question)
	case oc.lost:
		return fmt.Sprintf("%s %q: CONNECTION LOST", voice, c.Question)
	case oc.extra > 0:
		end += fmt.Sprintf(" and %d more terminals", oc.extra)
	}
	return fmt.Sprintf("%s %q -> %q: intent %s (want %s), sources %v (want %v), %s in %s",
		voice, c.Question, oc.transcript, oc.intent, c.Intent, oc.articles, c.Expect, end, oc.latency.Round(time.Millisecond))
}
