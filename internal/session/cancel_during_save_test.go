package session_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/voiced/voiced/internal/pipeline"
	"github.com/voiced/voiced/internal/protocol"
	"github.com/voiced/voiced/internal/session"
)

// slowStore is a conversation store whose Save takes as long as it is
// allowed (a shared store that is away), announcing each save on saving.
type slowStore struct {
	*session.MemoryConversations
	saving chan struct{}
}

func (s slowStore) Save(ctx context.Context, id string, c session.Conversation) error {
	select {
	case s.saving <- struct{}{}:
	default:
	}
	<-ctx.Done()
	return ctx.Err()
}

// TestCancelDuringSaveDoesNotHoldOthersTerminals: a cancel read while the
// request it names saves its history (its terminal decided, a slow
// store) must not hold back another request's terminal past its own
// deadline, as it did while the reader waited for the save.
func TestCancelDuringSaveDoesNotHoldOthersTerminals(t *testing.T) {
	var calls atomic.Int32
	fake := &fakeStages{finish: func(ctx context.Context) (string, error) {
		if calls.Add(1) == 1 {
			return "where is my order", nil // slow: answers, then saves
		}
		return blockUntilDone[string](ctx) // fast: ends by its deadline
	}}
	store := slowStore{session.NewMemoryConversations(time.Hour), make(chan struct{}, 1)}
	pcfg := pipeline.Config{}
	pcfg.LLM.Cap = 10 * time.Second
	h := newHarness(t, fake, pcfg, session.Config{MaxBudget: 10 * time.Second, Conversations: store,
		TerminalMargin: timely.TerminalMargin})
	c := h.dial()

	c.audio("slow", 0, true, time.Now().Add(4*time.Second))
	select {
	case <-store.saving:
	case <-h.ctx.Done():
		t.Fatal("the slow request never saved its history")
	}
	fastDeadline := time.Now().Add(500 * time.Millisecond)
	c.audio("fast", 0, true, fastDeadline)
	c.sendJSON(protocol.Cancel{Type: protocol.TypeCancel, RequestID: "slow"})

	c.terminal("fast")
	h.requireInTime(time.Now(), fastDeadline)
	c.terminal("slow")
}
