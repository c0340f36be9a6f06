package session_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/pipeline"
	"github.com/voiced/voiced/internal/protocol"
	"github.com/voiced/voiced/internal/session"
)

// TestCancelLatencyOnlyForCancelled: voiced_cancel_latency_seconds is
// observed once per request ended early, by the end that decided its
// terminal. Every call that ended a request observed it, when its context
// was not done yet, including one that lost the terminal's gate: a
// re-send of an id whose result was waiting for its history save (the
// result went out, the request was not replaced) counted a "replaced"
// latency, and two ends racing (a cancel and the deadline timer) counted
// one cancel twice. Here one client cancel must be one observation.
func TestCancelLatencyOnlyForCancelled(t *testing.T) {
	var calls atomic.Int32
	fake := &fakeStages{finish: func(ctx context.Context) (string, error) {
		if calls.Add(1) == 1 {
			return "where is my order", nil // answers, then saves
		}
		return blockUntilDone[string](ctx) // until the client cancels it
	}}
	store := slowStore{session.NewMemoryConversations(time.Hour), make(chan struct{}, 1)}
	h := newHarness(t, fake, pipeline.Config{}, session.Config{Conversations: store, TerminalMargin: timely.TerminalMargin})
	c := h.dial()
	c.audio("a", 0, true, time.Now().Add(1500*time.Millisecond))
	select {
	case <-store.saving: // a's result is decided; its save lasts until a's deadline
	case <-h.ctx.Done():
		t.Fatal("a never saved its history")
	}
	c.audio("a", 0, true, time.Now().Add(2*time.Second)) // cuts the save: the first a is answered
	term, _ := c.terminal("a")
	resultOf(t, term)
	c.sendJSON(protocol.Cancel{Type: protocol.TypeCancel, RequestID: "a"})
	term, _ = c.terminal("a")
	require.Equal(t, protocol.CodeCancelled, errorOf(t, term).Code)

	require.Eventually(t, func() bool { return metricValue(t, h, `voiced_cancel_latency_seconds{cause="cancelled"}`) == 1 },
		testTimeout, time.Millisecond)
	require.EqualValues(t, 1, metricValue(t, h, "voiced_cancellations_total"))
	require.EqualValues(t, 1, metricValue(t, h, "voiced_cancel_latency_seconds"), "one observation for the one request ended early")
}
