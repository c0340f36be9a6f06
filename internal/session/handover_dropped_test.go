package session_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/session"
)

// TestHandedOverToDroppedSessionNotHeld: the client's connection drops
// (session o, request r1 running on), it resumes (session s, request r2
// running on) and drops again. r1 ends: its terminal is handed to s, the
// conversation's live session, which has lost its connection too. s kept
// it with its own missed terminals, which since 5a0e865 go on as each is
// decided (finishWith), but a handed-over one waited for s's teardown,
// after its slowest request (r2). The client resumes a third time (N):
// r1's result must reach it then, not once r2 ends.
func TestHandedOverToDroppedSessionNotHeld(t *testing.T) {
	g := newGenerations(2)
	h := newHarness(t, g.fake, g.pcfg, session.Config{MaxBudget: 30 * time.Second})
	defer close(g.release[2])
	dropped := func(c *client) {
		t.Helper()
		c.conn.CloseNow()
		require.Eventually(t, func() bool { return h.srv.DetachedForTest(c.ready.SessionID) },
			testTimeout, time.Millisecond, "the server never saw the connection drop")
	}

	o := h.dial()
	o.audio("r1", 0, true, time.Now().Add(20*time.Second))
	g.atLLM(t, h, 1)
	dropped(o)

	s := h.dialResume(o.ready.ResumeToken)
	s.audio("r2", 0, true, time.Now().Add(20*time.Second))
	g.atLLM(t, h, 2)
	dropped(s)

	close(g.release[1])
	// o ends once r1's terminal is handed on (o's request goroutine
	// hands it over before it returns); s waits for r2.
	require.Eventually(t, func() bool { return h.srv.Sessions() == 1 }, testTimeout, time.Millisecond)

	n := h.dialResume(s.ready.ResumeToken)
	ctx, cancel := context.WithTimeout(h.ctx, 3*time.Second)
	defer cancel()
	m := n.terminalWithin(ctx, "r1", "r1's result did not reach the resumed session while r2 runs on")
	require.Equal(t, "answer 1.", resultOf(t, m).Answer)
}
