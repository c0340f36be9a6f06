package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/voiced/voiced/internal/domain"
	"github.com/voiced/voiced/internal/protocol"
	"github.com/voiced/voiced/internal/stages/sim"
	"github.com/voiced/voiced/internal/stages/stt/sttest"
	"github.com/voiced/voiced/internal/voicedtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// silence stands in for a synthesiser: 300 ms of silence at 16 kHz, so
// the test needs no flite; the simulated recogniser does not listen.
func silence(context.Context, sttest.Voice, string) ([]int16, int, error) {
	return make([]int16, 4800), 16000, nil
}

// Every call streams to a real voiced (simulated stages) and is scored
// from its terminal message: the simulated recogniser returns the
// questions in turn, so the word error rate is 0, and its intent is
// order_status, which one question in three is labelled. ("um" is not
// scored, as in evalstt.)
func TestEvaluateAgainstVoiced(t *testing.T) {
	cases := []domain.RetrievalCase{
		{Question: "um where is my order", Intent: "order_status", Expect: []string{"tracking-your-order"}},
		{Question: "hello there", Intent: "greeting"},
		{Question: "do you take apple pay", Intent: "payment_methods", Expect: []string{"payment-methods"}},
	}
	fast := sim.Config{Seed: 1, FailShare: -1, SlowShare: -1, Sigma: -1, IntentName: "order_status",
		STTMedian: 20 * time.Millisecond, IntentMedian: 2 * time.Millisecond, RetrievalMedian: 2 * time.Millisecond, LLMMedian: 20 * time.Millisecond}
	for _, c := range cases {
		fast.Transcripts = append(fast.Transcripts, c.Question)
	}
	addr := voicedtest.Start(t, fast)
	slt, _ := sttest.VoiceByName("flite-slt")
	kal, _ := sttest.VoiceByName("flite-kal")
	o := options{url: "ws://" + addr + "/v1/session", voices: []sttest.Voice{slt, kal}, frame: 20 * time.Millisecond, grace: 5 * time.Second, verbose: true, synth: silence}

	var out bytes.Buffer
	require.NoError(t, evaluate(testCtx(t), o, "callers.yaml", cases, &out))
	t.Log(out.String())
	require.Contains(t, out.String(), "callers.yaml: 3 questions (2 in scope)")
	for _, v := range []string{"flite-slt", "flite-kal"} {
		require.Contains(t, out.String(), "| "+v+" | 3 | 0.0% (0/11) | 33.3% (1/3) | 0.0% (0/2) | 0/1 | 0 | 0 | 0 | ", "the %s row", v)
	}
	require.Equal(t, 6, strings.Count(out.String(), "result in "), "a -v line per call, each ended by a result")
}

// A call's figures come from its terminal alone: the intent counts only
// on a result, the first source only when it is the first of the result's
// sources, and an unanswerable question counts when its answer cites
// anything; a call with no terminal, or whose connection dropped, has no
// latency and counts all its words as missed.
func TestScore(t *testing.T) {
	inScope := domain.RetrievalCase{Question: "where is my order", Intent: "order_status", Expect: []string{"tracking-your-order", "delayed-deliveries"}}
	offTopic := domain.RetrievalCase{Question: "tell me a joke", Intent: "out_of_scope"}
	const ms = time.Millisecond
	for _, tc := range []struct {
		name string
		c    domain.RetrievalCase
		oc   outcome
		want score
	}{
		{"right, second expected article first", inScope, outcome{transcript: "where is my order", intent: "order_status", articles: []string{"delayed-deliveries", "shipping-costs"}, latency: ms},
			score{calls: 1, words: 4, intentRight: 1, inScope: 1, firstGood: 1, latencies: []time.Duration{ms}}},
		{"expected article second only, and a second terminal", inScope, outcome{transcript: "where is my order", intent: "order_status", articles: []string{"shipping-costs", "tracking-your-order"}, latency: ms, extra: 1},
			score{calls: 1, words: 4, intentRight: 1, inScope: 1, extra: 1, latencies: []time.Duration{ms}}},
		{"a word wrong and the wrong intent", inScope, outcome{transcript: "where is my border", intent: "return_item", latency: ms},
			score{calls: 1, words: 4, wordErrs: 1, inScope: 1, latencies: []time.Duration{ms}}},
		{"an error: no intent, no transcript", inScope, outcome{code: "deadline_exceeded", latency: ms},
			score{calls: 1, words: 4, wordErrs: 4, inScope: 1, errors: map[string]int{"deadline_exceeded": 1}, latencies: []time.Duration{ms}}},
		{"no terminal: counted, no latency", inScope, outcome{missing: true},
			score{calls: 1, words: 4, wordErrs: 4, inScope: 1, missing: 1}},
		{"connection lost: counted, no latency", inScope, outcome{lost: true},
			score{calls: 1, words: 4, wordErrs: 4, inScope: 1, lost: 1}},
		{"off topic, cited", offTopic, outcome{transcript: "tell me a joke", intent: "out_of_scope", articles: []string{"contacting-us"}, degraded: []string{"llm_skipped"}, late: true, latency: ms},
			score{calls: 1, words: 4, intentRight: 1, unanswerable: 1, citing: 1, degraded: 1, late: 1, latencies: []time.Duration{ms}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s score
			s.add(tc.c, tc.oc)
			require.Equal(t, tc.want, s)
		})
	}
}

// A set file is checked against the domain: an article it does not have
// is an error naming the file, not a question that can never score.
func TestLoadSet(t *testing.T) {
	d, err := domain.Default()
	require.NoError(t, err)
	name, cases, err := loadSet(d, "")
	require.NoError(t, err)
	require.Equal(t, domain.HeldOutFile, name)
	require.NotEmpty(t, cases)

	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	require.NoError(t, os.WriteFile(good, []byte("questions:\n  - {question: \"do you take apple pay\", intent: payment_methods, expect: [payment-methods]}\n  - {question: \"hiya\", intent: greeting}\n"), 0o644))
	_, cases, err = loadSet(d, good)
	require.NoError(t, err)
	require.Len(t, cases, 2)

	bad := filepath.Join(dir, "bad.yaml")
	require.NoError(t, os.WriteFile(bad, []byte("questions:\n  - {question: \"do you take apple pay\", intent: payment_methods, expect: [no-such-article]}\n"), 0o644))
	_, _, err = loadSet(d, bad)
	require.ErrorContains(t, err, "bad.yaml")
	require.ErrorContains(t, err, "no-such-article")
}

// Usage errors are found before the network: each says what is wrong.
func TestUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args  []string
		token string
		want  string
	}{
		{[]string{"-frame", "5ms"}, "", "want 10ms to 1s"},
		{[]string{"-budget", "-1s"}, "", "must not be negative"},
		{[]string{"-grace", "-1s"}, "", "must not be negative"},
		{[]string{"callers.yaml"}, "", "unexpected arguments"},
		{[]string{"-voices", "no-such-voice"}, "", "no-such-voice"},
		{[]string{"-addr", "nocolon"}, "", "-addr"},
		{[]string{"-addr", "192.0.2.1:8080"}, "secret", "loopback"},
	} {
		t.Setenv("VOICED_TOKEN", tc.token)
		_, _, _, err := parseFlags(tc.args)
		require.ErrorContains(t, err, tc.want, "%v", tc.args)
	}
	t.Setenv("VOICED_TOKEN", "secret")
	o, _, _, err := parseFlags([]string{"-addr", "127.0.0.1:9", "-voices", "flite-slt"})
	require.NoError(t, err, "a token goes to a loopback address")
	require.Equal(t, "ws://127.0.0.1:9/v1/session", o.url)
	_, _, err = loadSet(nil, filepath.Join(t.TempDir(), "missing.yaml"))
	require.ErrorIs(t, err, fs.ErrNotExist)
}

// A server that takes the audio and never ends the request breaks the
// one-terminal promise: each call counts as having no terminal once the
// grace after its deadline is over, and the run goes on to the next.
func TestNoTerminalCounted(t *testing.T) {
	srv := voicedtest.Stub(t, nil)
	slt, _ := sttest.VoiceByName("flite-slt")
	o := options{url: "ws" + strings.TrimPrefix(srv.URL, "http") + "/v1/session", voices: []sttest.Voice{slt}, frame: 20 * time.Millisecond,
		grace: 100 * time.Millisecond, verbose: true, synth: silence}
	cases := []domain.RetrievalCase{
		{Question: "where is my order", Intent: "order_status", Expect: []string{"tracking-your-order"}},
		{Question: "hello", Intent: "greeting"},
	}
	var out bytes.Buffer
	require.NoError(t, evaluate(testCtx(t), o, "callers.yaml", cases, &out))
	require.Equal(t, 2, strings.Count(out.String(), "NO TERMINAL"), out.String())
	require.Contains(t, out.String(), "| flite-slt | 2 | 100.0% (5/5) | 0.0% (0/2) | 0.0% (0/1) | 0/1 | 0 | 0 | 0 | 2 | 0 | 0 | - / - / - |", out.String())
}

// A server that drops the connection, or ends a request twice, breaks a
// promise the tool counts for what it is: a lost connection is not a
// missing terminal, and a second terminal is counted beside the first.
func TestBrokenPromisesCounted(t *testing.T) {
	slt, _ := sttest.VoiceByName("flite-slt")
	cases := []domain.RetrievalCase{{Question: "hello", Intent: "greeting"}}
	for _, tc := range []struct {
		name   string
		answer func(ctx context.Context, ws *websocket.Conn, id string)
		line   string
		row    string
	}{
		{"dropped", func(ctx context.Context, ws *websocket.Conn, id string) {
			ws.CloseNow()
		}, "CONNECTION LOST", "| 0 | 0 | 0 | 0 | 1 | 0 | - / - / - |"},
		{"twice", func(ctx context.Context, ws *websocket.Conn, id string) {
			b, _ := json.Marshal(protocol.ErrorMessage{Type: protocol.TypeError, RequestID: id, Code: protocol.CodeOverloaded, Message: "busy"})
			_ = ws.Write(ctx, websocket.MessageText, b)
			_ = ws.Write(ctx, websocket.MessageText, b)
		}, "error overloaded", "| overloaded 1 | 0 | 0 | 0 | 0 | 1 | "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := voicedtest.Stub(t, tc.answer)
			o := options{url: "ws" + strings.TrimPrefix(srv.URL, "http") + "/v1/session", voices: []sttest.Voice{slt}, frame: 20 * time.Millisecond,
				grace: time.Second, verbose: true, synth: silence}
			var out bytes.Buffer
			require.NoError(t, evaluate(testCtx(t), o, "callers.yaml", cases, &out))
			require.Contains(t, out.String(), tc.line)
			require.Contains(t, out.String(), tc.row)
		})
	}
}

// A run that stops partway (a synthesiser that fails, an interrupt)
// still reports the calls it made, and says it stopped.
func TestStoppedEarlyReports(t *testing.T) {
	addr := voicedtest.Start(t, sim.Config{Seed: 1, FailShare: -1, SlowShare: -1, Sigma: -1, IntentName: "greeting",
		Transcripts: []string{"hello"}, STTMedian: 20 * time.Millisecond, IntentMedian: 2 * time.Millisecond,
		RetrievalMedian: 2 * time.Millisecond, LLMMedian: 20 * time.Millisecond})
	slt, _ := sttest.VoiceByName("flite-slt")
	fail := errors.New("synthesiser broke")
	synth := func(ctx context.Context, v sttest.Voice, text string) ([]int16, int, error) {
		if text != "hello" {
			return nil, 0, fail
		}
		return silence(ctx, v, text)
	}
	o := options{url: "ws://" + addr + "/v1/session", voices: []sttest.Voice{slt}, frame: 20 * time.Millisecond, grace: time.Second, synth: synth}
	cases := []domain.RetrievalCase{{Question: "hello", Intent: "greeting"}, {Question: "where is my order", Intent: "order_status", Expect: []string{"tracking-your-order"}}}
	var out bytes.Buffer
	err := evaluate(testCtx(t), o, "callers.yaml", cases, &out)
	require.ErrorIs(t, err, fail)
	require.ErrorContains(t, err, "stopped early")
	require.Contains(t, out.String(), "| flite-slt | 1 | 0.0% (0/1) | 100.0% (1/1) | - (0/0) | 0/1 |", out.String())
}

// Each frame asks for no more than the server grants: a later deadline
// would let the tool wait, and judge lateness, past the server's own.
func TestBudget(t *testing.T) {
	for _, tc := range []struct{ most, want, got time.Duration }{
		{1700 * time.Millisecond, 0, 1700 * time.Millisecond},
		{1700 * time.Millisecond, 300 * time.Millisecond, 300 * time.Millisecond},
		{1700 * time.Millisecond, 5 * time.Second, 1700 * time.Millisecond},
		{0, 0, defaultBudget},
		{0, 900 * time.Millisecond, 900 * time.Millisecond},
	} {
		require.Equal(t, tc.got, budget(tc.most, tc.want), "most %s, want %s", tc.most, tc.want)
	}
}
