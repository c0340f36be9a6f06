package session_test

import (
	"testing"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/pipeline"
	"github.com/voiced/voiced/internal/session"
)

// TestTinyIdleTimeoutDoesNotCrash: an -idle-timeout under 4 ns (a typo:
// -idle-timeout 3ns) made the reaper's period IdleTimeout/4 zero, and
// time.NewTicker panics on a non-positive period: the first session
// admitted crashed the server. It closes idle sessions instead.
func TestTinyIdleTimeoutDoesNotCrash(t *testing.T) {
	h := newHarness(t, &fakeStages{}, pipeline.Config{}, session.Config{IdleTimeout: 3})
	c := h.dial()
	_, _, err := c.conn.Read(h.ctx)
	require.Equal(t, websocket.StatusGoingAway, websocket.CloseStatus(err), "closed as idle: %v", err)
}
