package session_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/pipeline"
	"github.com/voiced/voiced/internal/session"
)

// TestDetachedRepeatedTurnKept: a session that lost its connection answers
// a turn identical to one its history already holds (the caller asked the
// same question and got the same answer: "yes" / "OK."). The first version
// of withStored merged it into the store's copy by content, which never
// adds a turn already there: the turn vanished while Answered counted it.
// A history that extends the store's is saved as it is.
func TestDetachedRepeatedTurnKept(t *testing.T) {
	release := make(chan struct{})
	fake := &fakeStages{started: make(chan string, 16)}
	fake.generate = func(ctx context.Context, emit func(string)) (pipeline.Generation, error) {
		fake.mu.Lock()
		k := len(fake.reqs)
		fake.mu.Unlock()
		if k == 2 { // the second request waits for the test
			select {
			case <-release:
			case <-ctx.Done():
				return pipeline.Generation{}, context.Cause(ctx)
			}
		}
		emit("OK.") // the same answer to the same question
		return pipeline.Generation{Provider: "fake"}, nil
	}
	pcfg := pipeline.Config{}
	pcfg.LLM.Cap = 20 * time.Second
	h := newHarness(t, fake, pcfg, session.Config{MaxBudget: 30 * time.Second})
	dl := time.Now().Add(25 * time.Second)

	c1 := h.dial()
	c1.audio("r1", 0, true, dl)
	c1.terminal("r1") // turn 1 saved
	c1.audio("r2", 0, true, dl)
	c1.ping() // r2 is read: it runs on after the drop
	c1.conn.CloseNow()
	require.Eventually(t, func() bool { return h.srv.DetachedForTest(c1.ready.SessionID) }, testTimeout, time.Millisecond)
	close(release) // r2 answered by the detached session: turn 2, equal to turn 1
	require.Eventually(t, func() bool { return h.srv.Sessions() == 0 }, testTimeout, time.Millisecond)

	c2 := h.dialResume(c1.ready.ResumeToken)
	replayed, _ := c2.terminal("r2")
	require.Equal(t, "OK.", resultOf(t, replayed).Answer) // the client has turn 2's result
	c2.audio("r3", 0, true, dl)
	c2.terminal("r3")
	fake.mu.Lock()
	hist := fake.reqs[len(fake.reqs)-1].History
	fake.mu.Unlock()
	turn := pipeline.Turn{User: "where is my order", Assistant: "OK."}
	require.Equal(t, []pipeline.Turn{turn, turn}, hist, "two turns answered, delivered; the history holds %d", len(hist))
}

// latentStore is a healthy store whose saves take latency (a Redis round
// trip on a busy network), well within the request's budget.
type latentStore struct {
	*session.MemoryConversations
	latency time.Duration
	saving  chan struct{}
	mu      sync.Mutex
	errs    []error
}

func (s *latentStore) Save(ctx context.Context, id string, c session.Conversation) error {
	select {
	case s.saving <- struct{}{}:
	default:
	}
	t := time.NewTimer(s.latency)
	defer t.Stop()
	select {
	case <-ctx.Done():
		s.mu.Lock()
		s.errs = append(s.errs, ctx.Err())
		s.mu.Unlock()
		return ctx.Err()
	case <-t.C:
	}
	return s.MemoryConversations.Save(ctx, id, c)
}

// TestStrayFrameLeavesSaveAlone: a request's result waits for its history
// save; the client then sends one more frame of that request (a stray
// frame after the final one). It is ignored, as frames of ended requests
// are: the first fix for the reader waiting on the save cut every such
// save, so a healthy store never got the turn the client had the answer
// to, and a resume answered without it.
func TestStrayFrameLeavesSaveAlone(t *testing.T) {
	fake := holding(99, nil)
	store := &latentStore{MemoryConversations: session.NewMemoryConversations(time.Hour),
		latency: time.Second, saving: make(chan struct{}, 1)}
	pcfg := pipeline.Config{}
	pcfg.LLM.Cap = 20 * time.Second
	h := newHarness(t, fake, pcfg, session.Config{MaxBudget: 30 * time.Second, Conversations: store})
	dl := time.Now().Add(8 * time.Second)

	c1 := h.dial()
	c1.audio("a", 0, true, dl)
	select {
	case <-store.saving:
	case <-h.ctx.Done():
		t.Fatal("a never saved its history")
	}
	c1.audio("a", 1, true, dl) // a stray frame of a, whose result is saving
	term, _ := c1.terminal("a")
	require.Equal(t, "answer 1.", resultOf(t, term).Answer) // the client was told
	c1.conn.CloseNow()
	require.Eventually(t, func() bool { return h.srv.Sessions() == 0 }, testTimeout, time.Millisecond)

	c2 := h.dialResume(c1.ready.ResumeToken)
	c2.audio("b", 0, true, dl)
	c2.terminal("b")
	fake.mu.Lock()
	hist := fake.reqs[len(fake.reqs)-1].History
	fake.mu.Unlock()
	store.mu.Lock()
	errs := store.errs
	store.mu.Unlock()
	require.Contains(t, hist, pipeline.Turn{User: "where is my order", Assistant: "answer 1."},
		"a's result was delivered, its turn is not in the store (save ended with %v)", errs)
	for _, err := range errs {
		require.False(t, errors.Is(err, context.Canceled), "a healthy save was cut: %v", err)
	}
}
