package session_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/pipeline"
	"github.com/voiced/voiced/internal/protocol"
	"github.com/voiced/voiced/internal/session"
)

// TestSupersedeRefusedForLoadReplacesNothing: with supersede on, a new
// request that the server refuses for load (saturated, or the session at
// -max-in-flight with requests that have not ended) must leave the
// request in flight alone: accepted work keeps its promise. Before, the
// request in flight was ended replaced first, and the new one was then
// refused overloaded: the client got neither answer.
func TestSupersedeRefusedForLoadReplacesNothing(t *testing.T) {
	l := &load{}
	fake := &fakeStages{started: make(chan string, 8)}
	release := make(chan struct{})
	fake.finish = finishOnRelease(release)
	h := newHarness(t, fake, pipeline.Config{}, session.Config{Load: l})
	c := h.dial()
	c.sendText(`{"type":"session.update","supersede":true}`)
	c.audio("r1", 0, true, time.Now().Add(5*time.Second))
	<-fake.started
	l.on.Store(true) // saturated from here

	c.audio("r2", 0, true, time.Now().Add(5*time.Second))
	for {
		m := c.next()
		if !protocol.Terminal(m.Type) {
			continue
		}
		require.Equal(t, "r2", m.RequestID, "r1 ended by a request that was refused: %s", m.Raw)
		require.Equal(t, protocol.CodeOverloaded, errorOf(t, m).Code, "%s", m.Raw)
		break
	}

	close(release)
	term, _ := c.terminal("r1")
	resultOf(t, term)
}
