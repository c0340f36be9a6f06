package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/voiced/voiced/internal/loadgen"
	"github.com/voiced/voiced/internal/protocol"
	"github.com/voiced/voiced/internal/stages/sim"
	"github.com/voiced/voiced/internal/voicedtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const testTimeout = 30 * time.Second

// testCtx bounds a test's run of the command.
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

func TestUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"help", []string{"-h"}, 0, "usage: voiceload"},
		{"unknown flag", []string{"-nope"}, 2, "flag provided but not defined"},
		{"extra argument", []string{"extra"}, 2, "unexpected arguments"},
		{"remote target", []string{"-addr", "10.0.0.1:8080"}, 2, "not a loopback address"},
		{"bad mix", []string{"-cancel", "80", "-disconnect", "40"}, 2, "at most 100"},
		{"missing wav", []string{"-wav", "/nonexistent.wav"}, 2, "no such file"},
		// These ran with the defaults, or panicked (make of a negative
		// length) for -save-utterance.
		{"negative sessions", []string{"-sessions", "-3"}, 2, "must not be negative"},
		{"negative grace", []string{"-grace", "-1s"}, 2, "must not be negative"},
		{"negative utterance", []string{"-utterance", "-1s"}, 2, "must not be negative"},
		{"negative utterance saved", []string{"-save-utterance", os.DevNull, "-utterance", "-1s"}, 2, "-utterance"},
		{"unwritable utterance", []string{"-save-utterance", "/nonexistent/u.wav"}, 2, "voiceload: open /nonexistent/u.wav: no such file"},
		{"unwritable profile", []string{"-cpuprofile", "/nonexistent/cpu.prof"}, 2, "voiceload: open /nonexistent/cpu.prof: no such file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			require.Equal(t, tc.code, run(testCtx(t), tc.args, &out, &errOut))
			require.Contains(t, errOut.String(), tc.want)
		})
	}
}

func TestSaveUtterance(t *testing.T) {
	path := filepath.Join(t.TempDir(), "u.wav")
	var out, errOut bytes.Buffer
	require.Equal(t, 0, run(testCtx(t), []string{"-save-utterance", path, "-utterance", "300ms"}, &out, &errOut), errOut.String())
	u, err := loadgen.LoadWAV(path)
	require.NoError(t, err)
	require.Equal(t, 300*time.Millisecond, u.Duration())
	_, err = os.Stat(path)
	require.NoError(t, err)
}

func TestThinkZeroMeansNone(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want time.Duration
	}{
		{nil, time.Second},
		{[]string{"-think", "0"}, -1},
		{[]string{"-think", "250ms"}, 250 * time.Millisecond},
	} {
		var cfg loadgen.Config
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		cfg.RegisterFlags(fs)
		require.NoError(t, fs.Parse(tc.args))
		require.Equal(t, tc.want, cfg.Think, "%v", tc.args)
	}
}

func TestRunAgainstVoicedWritesJSON(t *testing.T) {
	// No designed failures: the run allows no unplanned error (-max-error-share 0).
	addr := voicedtest.Start(t, sim.Config{Seed: 3, FailShare: -1})
	path := filepath.Join(t.TempDir(), "report.json")
	var out, errOut bytes.Buffer
	code := run(testCtx(t), []string{"-addr", addr, "-sessions", "4", "-duration", "1s", "-think", "0", "-utterance", "200ms",
		"-seed", "9", "-json", path}, &out, &errOut)
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", out.String(), errOut.String())
	require.Contains(t, out.String(), "OK: no invariant violated")
	require.Contains(t, errOut.String(), "requests", "progress lines")

	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var rep loadgen.Report
	require.NoError(t, json.Unmarshal(b, &rep))
	require.True(t, rep.OK())
	require.Equal(t, uint64(9), rep.Seed)
	require.Positive(t, rep.Requests.Terminated)
	require.Positive(t, rep.Server.Scrapes)
}

// TestExitStatusOnViolation: a server that accepts requests and never
// answers them breaks the one-terminal-message promise; voiceload exits 1.
func TestExitStatusOnViolation(t *testing.T) {
	silent := voicedtest.Stub(t, nil)
	var out, errOut bytes.Buffer
	code := run(testCtx(t), []string{"-addr", strings.TrimPrefix(silent.URL, "http://"), "-sessions", "2", "-requests", "2",
		"-utterance", "100ms", "-grace", "100ms", "-metrics-url", "off", "-quiet"}, &out, &errOut)
	require.Equal(t, 1, code, "stdout:\n%s\nstderr:\n%s", out.String(), errOut.String())
	require.Contains(t, out.String(), "FAIL: 2 requests got no terminal message")
}

// TestExitStatusOnUnplannedErrors: a server that refuses every request
// with overloaded makes voiceload exit 1, unless -max-error-share allows
// that share.
func TestExitStatusOnUnplannedErrors(t *testing.T) {
	busy := voicedtest.Stub(t, func(ctx context.Context, ws *websocket.Conn, id string) {
		b, _ := json.Marshal(protocol.ErrorMessage{Type: protocol.TypeError, RequestID: id, Code: protocol.CodeOverloaded, Message: "busy"})
		_ = ws.Write(ctx, websocket.MessageText, b)
	})
	args := []string{"-addr", strings.TrimPrefix(busy.URL, "http://"), "-sessions", "2", "-requests", "4",
		"-utterance", "100ms", "-think", "0", "-metrics-url", "off", "-quiet"}
	for _, tc := range []struct {
		extra []string
		code  int
		want  string
	}{
		{nil, 1, "FAIL: 4 requests (100.00% of 4 terminated) ended with error codes the run did not plan for (overloaded 4); -max-error-share allows 0%"},
		{[]string{"-max-error-share", "50"}, 1, "-max-error-share allows 50%"},
		{[]string{"-max-error-share", "100"}, 0, "OK: no invariant violated"},
		{[]string{"-max-error-share", "101"}, 2, ""},
	} {
		t.Run(strings.Join(tc.extra, "="), func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := run(testCtx(t), append(slices.Clone(args), tc.extra...), &out, &errOut)
			require.Equal(t, tc.code, code, "stdout:\n%s\nstderr:\n%s", out.String(), errOut.String())
			require.Contains(t, out.String(), tc.want)
		})
	}
}

// TestJSONToStdout: with -json - the report's JSON is stdout's alone and
// the table goes to stderr; -cpuprofile writes a profile and -v logs.
func TestJSONToStdout(t *testing.T) {
	busy := voicedtest.Stub(t, func(ctx context.Context, ws *websocket.Conn, id string) {
		b, _ := json.Marshal(protocol.ErrorMessage{Type: protocol.TypeError, RequestID: id, Code: protocol.CodeOverloaded, Message: "busy"})
		_ = ws.Write(ctx, websocket.MessageText, b)
	})
	prof := filepath.Join(t.TempDir(), "cpu.prof")
	var out, errOut bytes.Buffer
	code := run(testCtx(t), []string{"-addr", strings.TrimPrefix(busy.URL, "http://"), "-sessions", "1", "-requests", "2",
		"-utterance", "100ms", "-think", "0", "-metrics-url", "off", "-quiet", "-max-error-share", "100",
		"-json", "-", "-cpuprofile", prof, "-v"}, &out, &errOut)
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", out.String(), errOut.String())
	var rep loadgen.Report
	require.NoError(t, json.Unmarshal(out.Bytes(), &rep), "stdout is the JSON alone")
	require.True(t, rep.OK())
	require.Contains(t, errOut.String(), "OK: no invariant violated", "the table on stderr")
	fi, err := os.Stat(prof)
	require.NoError(t, err)
	require.Positive(t, fi.Size())
}

// signalledWriter collects what is written and closes started at the
// first write that contains mark.
type signalledWriter struct {
	mu      sync.Mutex
	b       bytes.Buffer
	mark    string
	started chan struct{}
	once    sync.Once
}

func (w *signalledWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if bytes.Contains(p, []byte(w.mark)) {
		w.once.Do(func() { close(w.started) })
	}
	return w.b.Write(p)
}

func (w *signalledWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// TestInterruptEndsTheRun: the first SIGINT ends the run, which still
// reports. The signal is sent once a progress line shows the run under
// way, so that voiceload's handler, not the default one, receives it.
func TestInterruptEndsTheRun(t *testing.T) {
	silent := voicedtest.Stub(t, nil)
	errOut := &signalledWriter{mark: "requests", started: make(chan struct{})}
	var out bytes.Buffer
	done := make(chan int, 1)
	go func() {
		done <- run(testCtx(t), []string{"-addr", strings.TrimPrefix(silent.URL, "http://"), "-sessions", "1",
			"-duration", "20s", "-utterance", "100ms", "-grace", "100ms", "-metrics-url", "off"}, &out, errOut)
	}()
	select {
	case <-errOut.started:
	case <-time.After(testTimeout):
		t.Fatal("no progress line")
	}
	require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGINT))
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		t.Fatal("the run went on after SIGINT")
	}
	require.Contains(t, errOut.String(), "voiceload: interrupted; waiting for requests in flight")
	require.Contains(t, out.String(), "requests", "the report")
}
