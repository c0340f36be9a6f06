package session_test

import (
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/pipeline"
	"github.com/voiced/voiced/internal/protocol"
	"github.com/voiced/voiced/internal/session"
)

// TestDrainRefusesWithUnavailable: a request that starts after the drain
// began is refused with unavailable (docs/protocol.md, 1012: "a request
// started after the drain began is refused with unavailable"), so that the
// client sends it again after it resumes elsewhere. A draining server that
// is also saturated, or a draining session at its -max-in-flight, refused
// it with overloaded instead: the client is told to retry the instance
// that is going away, and the refusal is counted as load shed.
func TestDrainRefusesWithUnavailable(t *testing.T) {
	for _, tc := range []struct {
		name      string
		saturated bool
		maxIn     int
	}{
		{name: "saturated", saturated: true},
		{name: "in-flight limit", maxIn: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := &load{}
			fake := &fakeStages{started: make(chan string, 8)}
			release := make(chan struct{})
			fake.finish = finishOnRelease(release)
			h := newHarness(t, fake, pipeline.Config{}, session.Config{Load: l, MaxInFlight: tc.maxIn})
			c := h.dial()
			c.audio("r1", 0, true, time.Now().Add(5*time.Second))
			<-fake.started // r1 in flight: the session stays open while it runs

			shut := make(chan error, 1)
			go func() { shut <- h.srv.Shutdown(h.ctx) }()
			for m := c.next(); m.Type != protocol.TypeSessionDraining; m = c.next() {
			}
			l.on.Store(tc.saturated)

			c.audio("r2", 0, true, time.Now().Add(5*time.Second))
			term, _ := c.terminal("r2")
			e := errorOf(t, term)
			require.Equal(t, protocol.CodeUnavailable, e.Code, "a request started during the drain: %s", term.Raw)

			close(release)
			term, _ = c.terminal("r1")
			resultOf(t, term)
			_, _, err := c.conn.Read(h.ctx)
			require.Equal(t, websocket.StatusServiceRestart, websocket.CloseStatus(err))
			require.NoError(t, <-shut)
		})
	}
}

// TestDrainSupersedeKeepsInFlight: with supersede on, a request that
// starts during the drain is refused (unavailable), so it replaces
// nothing: the request in flight that it would have replaced finishes, as
// every request in flight does during a drain. It was cancelled
// (replaced) first, and the client got neither answer.
func TestDrainSupersedeKeepsInFlight(t *testing.T) {
	fake := &fakeStages{started: make(chan string, 8)}
	release := make(chan struct{})
	fake.finish = finishOnRelease(release)
	h := newHarness(t, fake, pipeline.Config{}, session.Config{})
	c := h.dial()
	c.sendText(`{"type":"session.update","supersede":true}`)
	c.audio("r1", 0, true, time.Now().Add(5*time.Second))
	<-fake.started

	shut := make(chan error, 1)
	go func() { shut <- h.srv.Shutdown(h.ctx) }()
	for m := c.next(); m.Type != protocol.TypeSessionDraining; m = c.next() {
	}
	c.audio("r2", 0, true, time.Now().Add(5*time.Second))
	term, _ := c.terminal("r2")
	require.Equal(t, protocol.CodeUnavailable, errorOf(t, term).Code)

	close(release)
	term, _ = c.terminal("r1")
	resultOf(t, term)
	_, _, err := c.conn.Read(h.ctx)
	require.Equal(t, websocket.StatusServiceRestart, websocket.CloseStatus(err))
	require.NoError(t, <-shut)
}
