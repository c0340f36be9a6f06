package session_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/cancel"
	"github.com/voiced/voiced/internal/pipeline"
	"github.com/voiced/voiced/internal/protocol"
	"github.com/voiced/voiced/internal/session"
)

// observeLimit is how soon a running stage must see its request end.
const observeLimit = 50 * time.Millisecond

// TestCancellationObserved checks that cancel, replace and supersede each
// reach the running stage's context, with the right
// cause, within 50 ms, and touch no other request of the session.
func TestCancellationObserved(t *testing.T) {
	tests := []struct {
		name    string
		trigger func(c *client)
		cause   *cancel.Cause
		code    protocol.Code // "" when no terminal message is expected
	}{
		{"cancel", func(c *client) {
			c.sendJSON(protocol.Cancel{Type: protocol.TypeCancel, RequestID: "victim"})
		}, cancel.Cancelled, protocol.CodeCancelled},
		{"replace", func(c *client) {
			c.audio("victim", 0, false, time.Now().Add(5*time.Second))
		}, cancel.Replaced, protocol.CodeReplaced},
		{"supersede", func(c *client) {
			c.sendText(`{"type":"session.update","supersede":true}`)
			c.audio("newcomer", 0, false, time.Now().Add(5*time.Second))
		}, cancel.Replaced, protocol.CodeReplaced},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// On a loaded machine one scheduling hiccup can exceed the
			// limit; a real regression exceeds it every time.
			var best time.Duration
			for attempt := 0; attempt < 3; attempt++ {
				took := observeCancellation(t, tt.trigger, tt.cause, tt.code, tt.name != "supersede")
				t.Logf("%s observed after %v", tt.name, took)
				if attempt == 0 || took < best {
					best = took
				}
				if best <= observeLimit {
					break
				}
			}
			require.LessOrEqual(t, best, observeLimit, "cancellation not observed in time")
		})
	}
}

// observeCancellation runs one request whose STT blocks, triggers its end
// and returns how long the stage took to see it. It checks the cause, the
// terminal message, and that a bystander request on the same session was
// not touched.
func observeCancellation(t *testing.T, trigger func(*client), cause *cancel.Cause, code protocol.Code, checkBystander bool) time.Duration {
	fake := &fakeStages{started: make(chan string, 8), finish: blockUntilDone[string]}
	h := newHarness(t, fake, pipeline.Config{}, session.Config{})
	c := h.dial()
	// A bystander request on the same session, still streaming.
	c.audio("bystander", 0, false, time.Now().Add(5*time.Second))
	c.audio("victim", 0, true, time.Now().Add(5*time.Second))
	require.Equal(t, pipeline.StageSTT, <-fake.started)
	stage := fake.contexts(pipeline.StageSTT)[0]

	start := time.Now()
	trigger(c)
	took := waitCtxDone(t, stage, start, 5*time.Second)
	require.Equal(t, cause, cancel.Of(stage))
	if code == "" {
		return took
	}
	term, _ := c.terminal("victim")
	require.Equal(t, code, errorOf(t, term).Code)
	if checkBystander {
		// The bystander was alive: cancelling it now gets its own
		// terminal message.
		c.sendJSON(protocol.Cancel{Type: protocol.TypeCancel, RequestID: "bystander"})
		term, _ := c.terminal("bystander")
		require.Equal(t, protocol.CodeCancelled, errorOf(t, term).Code)
	}
	return took
}

// timely is the session configuration of the tests that check terminal
// messages against deadlines: a terminal margin that leaves a loaded
// 2-core machine room to schedule the write (the default, 10 ms, is for
// production, where the process sheds load before it runs that late).
// 50 ms was not enough under -race at a load average of 10-15: 2 of 50
// runs of the package wrote a terminal after its deadline.
var timely = session.Config{TerminalMargin: 150 * time.Millisecond}

// requireInTime checks a terminal message against its deadline dl: the
// server wrote it before dl (its own count of late terminals), and the
// client read it (at got) no later than clientSlack after dl. The client's
// side includes this test process's own scheduling, which a loaded machine
// delays by more than any server margin.
func (h *harness) requireInTime(got, dl time.Time) {
	h.t.Helper()
	const clientSlack = 250 * time.Millisecond
	require.Eventually(h.t, func() bool { return metricValue(h.t, h, "voiced_deadline_slack_seconds") > 0 },
		testTimeout, time.Millisecond, "the writer checks the terminal against its deadline")
	require.EqualValues(h.t, 0, metricValue(h.t, h, "voiced_late_terminals_total"), "written after the deadline")
	require.True(h.t, got.Before(dl.Add(clientSlack)), "terminal read %v after the deadline", got.Sub(dl))
	h.t.Logf("slack at the client %v", dl.Sub(got))
}

// TestStreamingDeadline ends a request whose final frame does not come
// before its deadline, before that deadline.
func TestStreamingDeadline(t *testing.T) {
	h := newHarness(t, &fakeStages{}, pipeline.Config{}, timely)
	c := h.dial()
	dl := time.Now().Add(300 * time.Millisecond)
	c.audio("slow", 0, false, dl)
	term, _ := c.terminal("slow")
	h.requireInTime(time.Now(), dl)
	require.Equal(t, protocol.CodeDeadlineExceeded, errorOf(t, term).Code)
}

// TestNoTerminalAfterDeadline runs stages that overrun their budgets,
// some ignoring their contexts, and checks the terminal message always
// arrives before the deadline, degraded rather than failed where the
// pipeline can still answer.
func TestNoTerminalAfterDeadline(t *testing.T) {
	// Stages that ignore their context block on release, which each
	// subtest closes in a cleanup that runs before the server's close
	// waits for them.
	var release chan struct{}
	ignoreCtx := func() { <-release }
	tests := []struct {
		name   string
		fake   *fakeStages
		budget time.Duration
		code   protocol.Code // expected error, "" for a result
		reason string        // expected degradation reason
	}{
		{name: "stt ignores ctx", fake: &fakeStages{finish: func(ctx context.Context) (string, error) {
			ignoreCtx()
			return "late", nil
		}}, budget: 400 * time.Millisecond, reason: pipeline.ReasonSTTTimeout},
		{name: "intent overruns", fake: &fakeStages{classify: func(ctx context.Context, _ string) (pipeline.Intent, error) {
			return blockUntilDone[pipeline.Intent](ctx)
		}}, budget: 600 * time.Millisecond, reason: pipeline.ReasonIntentTimeout},
		{name: "intent ignores ctx", fake: &fakeStages{classify: func(ctx context.Context, _ string) (pipeline.Intent, error) {
			ignoreCtx()
			return pipeline.Intent{Name: "late"}, nil
		}}, budget: 600 * time.Millisecond, reason: pipeline.ReasonIntentTimeout},
		{name: "retrieval ignores ctx", fake: &fakeStages{retrieve: func(ctx context.Context, _ string) ([]pipeline.Passage, error) {
			ignoreCtx()
			return nil, nil
		}}, budget: 600 * time.Millisecond, reason: pipeline.ReasonRetrievalTimeout},
		{name: "llm overruns before text", fake: &fakeStages{generate: func(ctx context.Context, emit func(string)) (pipeline.Generation, error) {
			return blockUntilDone[pipeline.Generation](ctx)
		}}, budget: 600 * time.Millisecond, reason: pipeline.ReasonLLMTimeout},
		{name: "llm ignores ctx after text", fake: &fakeStages{generate: func(ctx context.Context, emit func(string)) (pipeline.Generation, error) {
			emit("Half an ")
			ignoreCtx()
			emit("answer")
			return pipeline.Generation{Provider: "fake"}, nil
		}}, budget: 600 * time.Millisecond, reason: pipeline.ReasonLLMTimeout},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			release = make(chan struct{})
			h := newHarness(t, tt.fake, pipeline.Config{}, timely)
			t.Cleanup(func() { close(release) })
			c := h.dial()
			dl := time.Now().Add(tt.budget)
			c.audio("r1", 0, true, dl)
			term, before := c.terminal("r1")
			h.requireInTime(time.Now(), dl)
			if tt.code != "" {
				require.Equal(t, tt.code, errorOf(t, term).Code)
				return
			}
			res := resultOf(t, term)
			require.True(t, res.Degraded)
			require.Contains(t, res.Degradation, tt.reason)
			require.NotEmpty(t, res.Answer)
			var streamed strings.Builder
			for _, m := range before {
				if m.Type == protocol.TypeAnswerDelta {
					var d protocol.AnswerDelta
					require.NoError(t, m.As(&d))
					streamed.WriteString(d.Text)
				}
			}
			require.Equal(t, res.Answer, streamed.String(), "the answer is exactly what was streamed")
			require.Empty(t, c.ping(), "nothing of the request follows its terminal message")
		})
	}
}

// TestOneDeadline checks every stage sees the one deadline of the request:
// with caps larger than the budget, each stage's context ends at the
// request deadline less the margin and the reserve, never later.
func TestOneDeadline(t *testing.T) {
	fake := &fakeStages{}
	long := 10 * time.Second
	pcfg := pipeline.Config{}
	pcfg.STT.Cap, pcfg.Intent.Cap, pcfg.Retrieval.Cap, pcfg.LLM.Cap = long, long, long, long
	h := newHarness(t, fake, pcfg, session.Config{})
	c := h.dial()
	c.audio("r1", 0, true, time.Now().Add(time.Second))
	term, _ := c.terminal("r1")
	res := resultOf(t, term)

	// The deadline the server computed, at millisecond precision.
	want := protocol.Time(res.Budget.DeadlineAt).Add(-10*time.Millisecond - 100*time.Millisecond)
	for _, stage := range []string{pipeline.StageSTT, pipeline.StageIntent, pipeline.StageRetrieval, pipeline.StageLLM} {
		ctxs := fake.contexts(stage)
		require.Len(t, ctxs, 1, stage)
		got, ok := ctxs[0].Deadline()
		require.True(t, ok, "%s has no deadline", stage)
		require.InDelta(t, 0, got.Sub(want).Seconds(), 0.002, "%s deadline %v, want %v", stage, got, want)
	}
}

// TestShutdownDrains lets an in-flight request finish, refuses new
// sessions and closes the session with 1012 (service restart).
func TestShutdownDrains(t *testing.T) {
	release := make(chan struct{})
	fake := &fakeStages{started: make(chan string, 8), generate: func(ctx context.Context, emit func(string)) (pipeline.Generation, error) {
		select {
		case <-release:
		case <-ctx.Done():
			return pipeline.Generation{}, context.Cause(ctx)
		}
		emit("done")
		return pipeline.Generation{Provider: "fake"}, nil
	}}
	// The LLM waits for the test: neither its cap nor the budget may cut it
	// short on a loaded machine.
	pcfg := pipeline.Config{}
	pcfg.LLM.Cap = 20 * time.Second
	h := newHarness(t, fake, pcfg, session.Config{MaxBudget: 30 * time.Second})
	c := h.dial()
	c.audio("r1", 0, true, time.Now().Add(30*time.Second))
	for s := range fake.started {
		if s == pipeline.StageLLM {
			break
		}
	}
	shut := make(chan error, 1)
	go func() { shut <- h.srv.Shutdown(h.ctx) }()
	require.Eventually(t, h.srv.Draining, testTimeout, time.Millisecond)

	// New sessions are refused while draining.
	_, resp, err := websocket.Dial(h.ctx, "ws"+strings.TrimPrefix(h.http.URL, "http"), nil)
	require.Error(t, err)
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)

	// The session is told before the answer is released: the server's
	// flag alone does not say its sessions have heard (on a loaded
	// machine the notice came after the result, and the close was read
	// as that message).
	for m := c.next(); m.Type != protocol.TypeSessionDraining; m = c.next() {
		require.False(t, protocol.Terminal(m.Type), "r1 ended before the drain was announced: %+v", m)
	}
	close(release)
	term, _ := c.terminal("r1")
	require.Equal(t, "done", resultOf(t, term).Answer)
	_, _, err = c.conn.Read(h.ctx)
	require.Equal(t, websocket.StatusServiceRestart, websocket.CloseStatus(err))
	require.NoError(t, <-shut)
}

// TestForcedShutdown cancels in-flight requests with cause shutdown and
// tells the client.
func TestForcedShutdown(t *testing.T) {
	fake := &fakeStages{started: make(chan string, 8), finish: blockUntilDone[string]}
	h := newHarness(t, fake, pipeline.Config{}, session.Config{})
	c := h.dial()
	c.audio("r1", 0, true, time.Now().Add(5*time.Second))
	<-fake.started
	stage := fake.contexts(pipeline.StageSTT)[0]
	ctx, cancelShut := context.WithCancel(h.ctx)
	cancelShut() // no grace at all
	require.Error(t, h.srv.Shutdown(ctx))
	require.Equal(t, cancel.Shutdown, cancel.Of(stage))
	term, _ := c.terminal("r1")
	require.Equal(t, protocol.CodeUnavailable, errorOf(t, term).Code)
}

func TestAdmission(t *testing.T) {
	t.Run("max sessions", func(t *testing.T) {
		h := newHarness(t, &fakeStages{}, pipeline.Config{}, session.Config{MaxSessions: 1})
		require.False(t, h.srv.Full())
		c := h.dial()
		require.True(t, h.srv.Full(), "full: the agent check says ready 0%")
		_, resp, err := websocket.Dial(h.ctx, "ws"+strings.TrimPrefix(h.http.URL, "http"), nil)
		require.Error(t, err)
		require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
		c.conn.Close(websocket.StatusNormalClosure, "")
		require.Eventually(t, func() bool { return !h.srv.Full() }, testTimeout, time.Millisecond)
	})
	t.Run("tokens", func(t *testing.T) {
		h := newHarness(t, &fakeStages{}, pipeline.Config{}, session.Config{Tokens: []string{"s3cret"}})
		url := "ws" + strings.TrimPrefix(h.http.URL, "http")
		_, resp, err := websocket.Dial(h.ctx, url, nil)
		require.Error(t, err)
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
		_, resp, err = websocket.Dial(h.ctx, url, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer wrong"}}})
		require.Error(t, err)
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
		conn, _, err := websocket.Dial(h.ctx, url, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer s3cret"}}})
		require.NoError(t, err)
		conn.CloseNow()
		conn, _, err = websocket.Dial(h.ctx, url+"?access_token=s3cret", nil)
		require.NoError(t, err)
		conn.CloseNow()
		// The scheme in any case (RFC 7235); another scheme's header (a
		// proxy's Basic) leaves the query parameter to speak.
		conn, _, err = websocket.Dial(h.ctx, url, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"bearer s3cret"}}})
		require.NoError(t, err)
		conn.CloseNow()
		conn, _, err = websocket.Dial(h.ctx, url+"?access_token=s3cret", &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Basic dXNlcjpwdw=="}}})
		require.NoError(t, err)
		conn.CloseNow()
	})
	t.Run("foreign origin", func(t *testing.T) {
		h := newHarness(t, &fakeStages{}, pipeline.Config{}, session.Config{})
		_, resp, err := websocket.Dial(h.ctx, "ws"+strings.TrimPrefix(h.http.URL, "http"),
			&websocket.DialOptions{HTTPHeader: http.Header{"Origin": {"https://evil.example"}}})
		require.Error(t, err)
		require.Equal(t, http.StatusForbidden, resp.StatusCode)
	})
}

// TestDeadlineWhileRecognizerBehind: a recognizer that is slower than real
// time has frames queued when the final frame arrives; the deadline still
// runs from the final frame's arrival, not from when the recognizer gets
// to it, and the request ends within it with what there is (here no words:
// stt_timeout and the templated answer).
func TestDeadlineWhileRecognizerBehind(t *testing.T) {
	fake := &fakeStages{write: func(ctx context.Context) error {
		timer := time.NewTimer(50 * time.Millisecond) // 2.5x slower than real time
		defer timer.Stop()
		select {
		case <-timer.C:
			return nil
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}}
	h := newHarness(t, fake, pipeline.Config{}, timely)
	c := h.dial()
	dl := time.Now().Add(700 * time.Millisecond)
	for seq := range int64(30) {
		c.audio("r1", seq, seq == 29, dl) // 30 frames at once: 1.5 s of recognizer work
	}
	term, _ := c.terminal("r1")
	h.requireInTime(time.Now(), dl)
	// No words in time: asked to say it again, within the deadline.
	res := resultOf(t, term)
	require.Contains(t, res.Degradation, pipeline.ReasonSTTTimeout)
	require.Empty(t, res.Transcript)
}
