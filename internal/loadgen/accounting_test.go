package loadgen

import (
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/client"
)

// TestMissingNotHiddenByALaterDisconnect: a request whose terminal never
// came (it waited out deadline + grace + sync on a live connection) stays
// missing when a later turn of the same session drops the connection, as
// closedSlot's next disconnect turn does; it was counted "disconnected by
// us".
func TestMissingNotHiddenByALaterDisconnect(t *testing.T) {
	r, c, _, start := missingOne(t, false)
	ctx := testCtx(t)

	// The session's next turn is a disconnect turn (mid-utterance).
	b := c.open("disc-2", kindDisconnect)
	_ = c.send(ctx, b, r.utts[0], 2)
	r.disconnectDrop(c)
	b.release()
	rep := r.report(start, time.Now(), c.budget, c.budget, nil, false)
	t.Logf("missing %d, disconnected by us %d, ok %v", rep.Invariants.Missing, rep.Requests.Disconnected, rep.OK())
	require.Equal(t, 1, rep.Invariants.Missing, "the earlier missing terminal is still missing")
	require.Equal(t, 1, rep.Requests.Disconnected, "only the disconnect turn's own request")
}

// TestDuplicateErrorTerminalCounted: the server answers each cancel
// with two terminal messages ("cancelled" twice). The protocol allows one;
// voiced never sends an error with a requestId after the request's
// terminal (late frames and cancels are ignored or answered at session
// level), so the second copy is a duplicate, not a race (it was filed
// under "raced" and the run passed).
func TestDuplicateErrorTerminalCounted(t *testing.T) {
	f := &fakeServer{proc: 300 * time.Millisecond, maxBudget: 1700 * time.Millisecond, bug: "dupcancel"}
	srv := f.start(t)
	cfg := quick(addrOf(srv))
	cfg.Duration, cfg.MetricsURL = 1500*time.Millisecond, "off"
	cfg.Mix = Mix{Cancel: 100}
	rep, err := Run(testCtx(t), cfg)
	require.NoError(t, err)
	t.Logf("cancelled %d, duplicate %d, raced %d, ok %v", rep.Requests.ByCode["cancelled"],
		rep.Invariants.Duplicate, rep.Invariants.Raced, rep.OK())
	require.Positive(t, rep.Requests.ByCode["cancelled"])
	require.Positive(t, rep.Invariants.Duplicate, "every cancelled request got two terminal messages")
	require.False(t, rep.OK())
}

// TestServerCutIsAViolation: the server drops the connection
// (1011) instead of answering every third request. Those requests never
// get a terminal message, and the run fails (it passed).
func TestServerCutIsAViolation(t *testing.T) {
	f := &fakeServer{proc: 50 * time.Millisecond, maxBudget: 1700 * time.Millisecond, bug: "cut"}
	srv := f.start(t)
	cfg := quick(addrOf(srv))
	cfg.Duration, cfg.MetricsURL = 1500*time.Millisecond, "off"
	rep, err := Run(testCtx(t), cfg)
	require.NoError(t, err)
	t.Logf("started %d, terminated %d, closed by the server %d, missing %d, ok %v, violations %v",
		rep.Requests.Started, rep.Requests.Terminated, rep.Requests.ServerClosed, rep.Invariants.Missing, rep.OK(), rep.Violations)
	require.Positive(t, rep.Requests.ServerClosed)
	require.False(t, rep.OK(), "requests the server cut off without a terminal message")
}

// TestClientLimitIsNotAServerClose: in open loop one session carries
// more than the client's default MaxWaiting (256) requests; they are all
// sent (Open refused the rest, counted "closed by the server" though no
// connection closed).
func TestClientLimitIsNotAServerClose(t *testing.T) {
	f := &fakeServer{proc: 1200 * time.Millisecond, maxBudget: 1700 * time.Millisecond}
	srv := f.start(t)
	cfg := quick(addrOf(srv))
	cfg.Sessions, cfg.Rate, cfg.Duration, cfg.MetricsURL = 1, 500, time.Second, "off"
	rep, err := Run(testCtx(t), cfg)
	require.NoError(t, err)
	t.Logf("started %d, results %d, closed by the server %d, sessions opened %d, ok %v",
		rep.Requests.Started, rep.Requests.ByCode["result"], rep.Requests.ServerClosed, rep.SessionsOpened, rep.OK())
	require.Equal(t, 1, rep.SessionsOpened, "the one connection never closed")
	require.Zero(t, rep.Requests.ServerClosed, "no request was closed by the server")
}

// TestMissingNotHiddenByALaterKill: with -resume, the same request stays
// missing when its connection drops later without a close frame (the
// client's OnDisconnect, called here as the client calls it); it was
// counted "lost with a killed instance").
func TestMissingNotHiddenByALaterKill(t *testing.T) {
	r, c, _, start := missingOne(t, true)
	c.dropped(io.ErrUnexpectedEOF) // minutes later, the instance is killed
	rep := r.report(start, time.Now(), c.budget, c.budget, nil, false)
	t.Logf("missing %d, lost with instance %d, ok %v", rep.Invariants.Missing, rep.Resume.LostWithInstance, rep.OK())
	require.Equal(t, 1, rep.Invariants.Missing, "still missing")
}

// TestWaitedOutThenReplayedCounts: with -resume, a request waits out
// deadline + grace + sync (missing); later its connection drops and the
// resumed session replays its terminal (a drain ends the stuck request
// "cancelled" and keeps the terminal). It counts, late (it was neither
// missing nor late, and the run passed).
func TestWaitedOutThenReplayedCounts(t *testing.T) {
	r, c, a, start := missingOne(t, true)
	c.dropped(io.ErrUnexpectedEOF) // later, the connection drops
	// The resumed session replays the request's terminal.
	c.onEvent(a, client.Event{Type: "error", RequestID: "plain-1", At: time.Now(), Replayed: true,
		Raw: []byte(`{"type":"error","requestId":"plain-1","code":"cancelled","message":"connection lost"}`)})
	rep := r.report(start, time.Now(), c.budget, c.budget, nil, false)
	t.Logf("missing %d, late %d, resume missed %d replayed %d, ok %v", rep.Invariants.Missing, rep.Invariants.Late,
		rep.Resume.Missed, rep.Resume.Replayed, rep.OK())
	require.Positive(t, rep.Invariants.Missing+rep.Invariants.Late, "the terminal came long after deadline + grace")
}

// missingOne opens a session (with -resume or not) on a fake server that
// withholds the result of the request it sends, plain-1, and waits it
// out: the request is missing.
func missingOne(t *testing.T, resume bool) (*runner, *conn, *attempt, time.Time) {
	t.Helper()
	f := &fakeServer{proc: 50 * time.Millisecond, maxBudget: 1700 * time.Millisecond, bug: "missing"}
	srv := f.start(t)
	ctx := testCtx(t)
	cfg := quick(addrOf(srv))
	cfg.Budget, cfg.MetricsURL, cfg.Resume = 300*time.Millisecond, "off", resume
	r, err := newRunner(cfg.withDefaults())
	require.NoError(t, err)
	c := r.connect(ctx)
	require.NotNil(t, c)
	t.Cleanup(c.close)
	start := time.Now()
	f.n.Store(2) // the fake withholds the result of its 3rd request: this one
	a := c.open("plain-1", kindPlain)
	require.NoError(t, c.send(ctx, a, r.utts[0], 0))
	c.wait(ctx, a) // deadline + grace + sync: no terminal
	a.release()
	require.Equal(t, 1, r.report(start, time.Now(), c.budget, c.budget, nil, false).Invariants.Missing,
		"missing once it has waited out its grace")
	return r, c, a, start
}
