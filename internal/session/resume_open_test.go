package session_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/pipeline"
	"github.com/voiced/voiced/internal/protocol"
	"github.com/voiced/voiced/internal/session"
)

// TestResumeWhileOldConnectionOpen: a mobile client whose network
// changed resumes while the server has not yet noticed that the old
// connection is gone (no FIN, no RST: a half-open TCP connection, which
// the server finds only at the idle timeout). The result of the request
// the old session was answering must reach the resumed session, as
// protocol.md promises ("A terminal that is written while the client is
// reconnecting to the same instance goes straight to the resumed
// session"); it was written to the abandoned connection instead, and
// lost.
func TestResumeWhileOldConnectionOpen(t *testing.T) {
	release := make(chan struct{})
	fake := holding(1, release) // the first request waits for the test
	pcfg := pipeline.Config{}
	pcfg.LLM.Cap = 20 * time.Second
	h := newHarness(t, fake, pcfg, session.Config{MaxBudget: 30 * time.Second})
	old := h.dial()
	old.audio("r1", 0, true, time.Now().Add(30*time.Second)) // final: runs on
	for llm := false; !llm; {
		select {
		case s := <-fake.started:
			llm = s == pipeline.StageLLM
		case <-h.ctx.Done():
			t.Fatal("request r1 never reached its LLM stage")
		}
	}
	// The client gives up on the old connection without closing it (its
	// network went away) and resumes.
	c2 := h.dialResume(old.ready.ResumeToken)
	require.True(t, c2.ready.Resumed)
	close(release)

	// The old connection, which the client no longer reads, either gets
	// r1's result (lost: the bug) or is closed by the server.
	for {
		_, b, err := old.conn.Read(h.ctx)
		if err != nil {
			require.NoError(t, h.ctx.Err(), "the old connection neither closed nor got r1's terminal")
			break
		}
		m, err := protocol.DecodeServer(b)
		require.NoError(t, err)
		if m.RequestID == "r1" && protocol.Terminal(m.Type) {
			t.Fatalf("r1's terminal went to the abandoned connection: %s", m.Raw)
		}
	}
	term, _ := c2.terminal("r1")
	require.Equal(t, "answer 1.", resultOf(t, term).Answer)
}

// TestHandedOverBeforeSlowestRequestEnds: a connection drops with two
// requests running on (final frames in); the client resumes at once. The
// first request's result, ready long before the second's, must reach
// the resumed session then, within its own deadline: "a terminal that is
// written while the client is reconnecting to the same instance goes
// straight to the resumed session". It was held in the old session
// until its last request ended (teardown's flush), up to that request's
// deadline: here r1's 2 s deadline would pass while r2 runs for 20 s.
func TestHandedOverBeforeSlowestRequestEnds(t *testing.T) {
	g := newGenerations(2)
	h := newHarness(t, g.fake, g.pcfg, session.Config{MaxBudget: 30 * time.Second})
	defer close(g.release[2])
	old := h.dial()
	r1Deadline := time.Now().Add(2 * time.Second)
	atLLM := func(want int) { g.atLLM(t, h, want) }
	old.audio("r1", 0, true, r1Deadline)
	atLLM(1)
	old.audio("r2", 0, true, time.Now().Add(20*time.Second))
	atLLM(2)
	old.conn.CloseNow()
	c2 := h.dialResume(old.ready.ResumeToken)
	close(g.release[1])

	ctx, cancel := context.WithDeadline(h.ctx, r1Deadline)
	defer cancel()
	m := c2.terminalWithin(ctx, "r1", "r1's result did not reach the resumed session by its deadline")
	require.Equal(t, "answer 1.", resultOf(t, m).Answer)
}

// terminalWithin reads until id's terminal message and returns it; the
// test fails with why when ctx ends first.
func (c *client) terminalWithin(ctx context.Context, id, why string) protocol.ServerMessage {
	c.h.t.Helper()
	for {
		_, b, err := c.conn.Read(ctx)
		require.NoError(c.h.t, err, why)
		m, err := protocol.DecodeServer(b)
		require.NoError(c.h.t, err)
		if m.RequestID == id && protocol.Terminal(m.Type) {
			return m
		}
	}
}

// generations is a fake whose nth generation (from 1) answers "answer
// n." once release[n] is closed, or ends with its context.
type generations struct {
	fake    *fakeStages
	pcfg    pipeline.Config
	release map[int]chan struct{}
	// numbered receives each generation's n once it knows it: a test that
	// waits for it before sending the next request keeps the numbers in
	// the requests' order (n is read after the fake records the request).
	numbered chan int
}

func newGenerations(n int) *generations {
	g := &generations{fake: &fakeStages{}, release: map[int]chan struct{}{}, numbered: make(chan int, n)}
	for k := 1; k <= n; k++ {
		g.release[k] = make(chan struct{})
	}
	g.pcfg.LLM.Cap = 30 * time.Second
	g.fake.generate = func(ctx context.Context, emit func(string)) (pipeline.Generation, error) {
		g.fake.mu.Lock()
		k := len(g.fake.reqs)
		g.fake.mu.Unlock()
		g.numbered <- k
		select {
		case <-g.release[k]:
		case <-ctx.Done():
			return pipeline.Generation{}, context.Cause(ctx)
		}
		emit(fmt.Sprintf("answer %d.", k))
		return pipeline.Generation{Provider: "fake"}, nil
	}
	return g
}

// atLLM waits for the next generation to start and checks it is the
// want-th.
func (g *generations) atLLM(t *testing.T, h *harness, want int) {
	t.Helper()
	select {
	case k := <-g.numbered:
		require.Equal(t, want, k)
	case <-h.ctx.Done():
		t.Fatal("a request never reached its LLM stage")
	}
}
