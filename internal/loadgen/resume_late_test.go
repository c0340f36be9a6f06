package loadgen

import (
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/client"
)

// TestLateTerminalAfterAnEarlyResumeCounts: with -resume, a request's
// connection drops (1012) and the session is resumed well before the
// request's deadline; the request's terminal then comes on the resumed
// connection, not replayed (the server decided it after the resume and
// forwarded it live), after its deadline. The server had a connection to
// deliver it on time: it is late, and has a latency. It was taken as
// "kept while the client was away": neither late nor in any latency, and
// the run passed.
func TestLateTerminalAfterAnEarlyResumeCounts(t *testing.T) {
	for _, tc := range []struct {
		name     string
		replayed bool // read in the resumed session's handshake
		resumeIn time.Duration
		late     int
	}{
		{"forwarded live after an early resume", false, 50 * time.Millisecond, 1},
		{"replayed in the handshake", true, 50 * time.Millisecond, 0},
		{"forwarded live, resumed after the deadline", false, 400 * time.Millisecond, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeServer{proc: 50 * time.Millisecond, maxBudget: 1700 * time.Millisecond}
			srv := f.start(t)
			cfg := quick(addrOf(srv))
			cfg.MetricsURL, cfg.Resume = "off", true
			r, err := newRunner(cfg.withDefaults())
			require.NoError(t, err)
			c := r.connect(testCtx(t))
			require.NotNil(t, c)
			t.Cleanup(c.close)
			start := time.Now()

			// A request whose final frame went at start, due 200 ms later.
			a := c.open("plain-1", kindPlain)
			c.mu.Lock()
			a.firstSent, a.finalSent, a.deadline = start, start, start.Add(200*time.Millisecond)
			a.deadlineAt = c.cl.ServerTime(a.deadline)
			c.mu.Unlock()
			c.dropped(websocket.CloseError{Code: websocket.StatusServiceRestart}) // as the client calls it
			c.connected(client.SessionReady{Resumed: true, At: start.Add(tc.resumeIn)})
			// Its terminal, 300 ms after the deadline.
			c.onEvent(a, client.Event{Type: client.TypeError, RequestID: "plain-1", At: start.Add(500 * time.Millisecond), Replayed: tc.replayed,
				Raw: []byte(`{"type":"error","requestId":"plain-1","code":"deadline_exceeded","message":"deadline exceeded"}`)})
			a.release()

			rep := r.report(start, time.Now(), c.budget, c.budget, nil, false)
			t.Logf("late %d, latency count %d, resume missed %d replayed %d, violations %v",
				rep.Invariants.Late, rep.Latency.Count, rep.Resume.Missed, rep.Resume.Replayed, rep.Violations)
			require.Equal(t, tc.late, rep.Invariants.Late)
			require.Equal(t, tc.late, rep.Latency.Count, "a terminal judged on time or late has a latency")
			require.Equal(t, 1, rep.Resume.Missed)
			require.Equal(t, 1, rep.Resume.Replayed, "it came on the resumed session")
			require.Equal(t, 1, rep.Requests.Terminated)
		})
	}
}

// TestDroppedMissingNotHiddenByALaterDisconnect: with -resume, a
// request's connection drops (1012), the session is resumed, and the
// request's terminal never comes, well past its deadline plus grace: it
// is missing. A later turn of the session drops the connection (a
// disconnect turn); that must not turn the missing request into one
// "disconnected by us" (no terminal expected), as it did.
func TestDroppedMissingNotHiddenByALaterDisconnect(t *testing.T) {
	f := &fakeServer{proc: 50 * time.Millisecond, maxBudget: 1700 * time.Millisecond}
	srv := f.start(t)
	cfg := quick(addrOf(srv))
	cfg.MetricsURL, cfg.Resume = "off", true
	r, err := newRunner(cfg.withDefaults())
	require.NoError(t, err)
	ctx := testCtx(t)
	c := r.connect(ctx)
	require.NotNil(t, c)
	t.Cleanup(c.close)
	start := time.Now()

	// A request whose final frame went long ago: due, with its grace, by now.
	a := c.open("plain-1", kindPlain)
	c.mu.Lock()
	a.firstSent, a.finalSent, a.deadline = start.Add(-time.Minute), start.Add(-time.Minute), start.Add(-time.Minute+200*time.Millisecond)
	c.mu.Unlock()
	c.dropped(websocket.CloseError{Code: websocket.StatusServiceRestart})
	c.connected(client.SessionReady{Resumed: true, At: start.Add(-time.Minute + 50*time.Millisecond)})
	a.release()

	// The session's next turn is a disconnect turn.
	b := c.open("disc-2", kindDisconnect)
	r.disconnectDrop(c)
	b.release()
	rep := r.report(start, time.Now(), c.budget, c.budget, nil, false)
	t.Logf("missing %d, disconnected by us %d, violations %v", rep.Invariants.Missing, rep.Requests.Disconnected, rep.Violations)
	require.Equal(t, 1, rep.Invariants.Missing, "resumed, due long ago, and no terminal")
	require.Equal(t, 1, rep.Requests.Disconnected, "only the disconnect turn's own request")
}
