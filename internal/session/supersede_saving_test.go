package session_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/pipeline"
	"github.com/voiced/voiced/internal/protocol"
	"github.com/voiced/voiced/internal/session"
)

// TestSupersedeSavingThenReuseID: with supersede on, request a has its
// result decided and waits for its history save (a slow store). b's
// first frame supersedes without waiting for a. The client then re-sends
// a (seq 0). a stays registered until its terminal is sent, so the re-send
// replaces it and its terminal comes first; when supersede took it out of
// the registry, the new "a" opened and its events went out before the old
// a's terminal (protocol.md: nothing with that requestId follows the
// terminal).
func TestSupersedeSavingThenReuseID(t *testing.T) {
	fake := &fakeStages{}
	store := slowStore{session.NewMemoryConversations(time.Hour), make(chan struct{}, 1)}
	pcfg := pipeline.Config{}
	pcfg.LLM.Cap = 10 * time.Second
	h := newHarness(t, fake, pcfg, session.Config{MaxBudget: 10 * time.Second, Conversations: store})
	c := h.dial()
	c.sendJSON(protocol.SessionUpdate{Type: protocol.TypeSessionUpdate, Supersede: new(true)})
	c.audio("a", 0, true, time.Now().Add(6*time.Second))
	select {
	case <-store.saving: // a's result is decided; its save lasts until a's deadline
	case <-h.ctx.Done():
		t.Fatal("a never saved its history")
	}
	c.ping() // a's events, all queued before its save, are read

	dl := time.Now().Add(6 * time.Second)
	c.audio("b", 0, true, dl) // supersedes a, which is saving
	c.audio("a", 0, true, dl) // the id a again: a new request
	for {
		m := c.next()
		if m.RequestID != "a" {
			continue
		}
		require.True(t, protocol.Terminal(m.Type),
			"a %s of the new request a came before the old a's terminal: %s", m.Type, m.Raw)
		return
	}
}
