package session_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/pipeline"
	"github.com/voiced/voiced/internal/session"
)

// TestResumeStaleSessionKeepsNewerTurns: a request whose final frame had
// arrived runs on after its connection dropped. Meanwhile the client
// resumed, had a second request answered, and lost that connection too.
// When the first request is answered at last, the conversation's history
// keeps the second turn (the client has its result); the old session used
// to save its own, older history over it.
func TestResumeStaleSessionKeepsNewerTurns(t *testing.T) {
	release := make(chan struct{})
	fake := holding(1, release) // the first request waits for the test
	pcfg := pipeline.Config{}
	pcfg.LLM.Cap = 20 * time.Second
	h := newHarness(t, fake, pcfg, session.Config{MaxBudget: 30 * time.Second})
	dl := time.Now().Add(25 * time.Second)

	c1 := h.dial()
	c1.audio("r1", 0, true, dl) // runs on after the drop
	// r1 is held in its LLM stage before anything else is sent: holding
	// holds the first request to get there (a read frame is not enough).
	for llm1 := false; !llm1; {
		select {
		case s := <-fake.started:
			llm1 = s == pipeline.StageLLM
		case <-h.ctx.Done():
			t.Fatal("request r1 never reached its LLM stage")
		}
	}
	c1.conn.CloseNow()
	require.Eventually(t, func() bool { return h.srv.DetachedForTest(c1.ready.SessionID) }, testTimeout, time.Millisecond)

	c2 := h.dialResume(c1.ready.ResumeToken)
	c2.audio("r2", 0, true, dl)
	term, _ := c2.terminal("r2")
	require.Equal(t, "answer 2.", resultOf(t, term).Answer) // the client has turn 2
	c2.conn.CloseNow()
	// c2's session ends; c1's still waits for r1.
	require.Eventually(t, func() bool { return h.srv.Sessions() == 1 }, testTimeout, time.Millisecond)

	close(release) // r1 is answered by the old session
	require.Eventually(t, func() bool { return h.srv.Sessions() == 0 }, testTimeout, time.Millisecond)

	c3 := h.dialResume(c2.ready.ResumeToken)
	replayed, _ := c3.terminal("r1")
	require.Equal(t, "answer 1.", resultOf(t, replayed).Answer)
	c3.audio("r3", 0, true, dl)
	term, _ = c3.terminal("r3")
	require.Equal(t, "answer 3.", resultOf(t, term).Answer)
	fake.mu.Lock()
	hist := fake.reqs[len(fake.reqs)-1].History
	fake.mu.Unlock()
	require.Contains(t, hist, pipeline.Turn{User: "where is my order", Assistant: "answer 2."},
		"turn 2, answered and delivered, is lost from the history: %+v", hist)
}
