package session_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/pipeline"
	"github.com/voiced/voiced/internal/protocol"
	"github.com/voiced/voiced/internal/session"
)

// TestRefusedTurnInterruptsNothing: with interrupt on, a new turn that
// the server refuses at its start (overloaded while saturated,
// unavailable while draining) gets that refusal "and nothing else": the
// turn in flight is not ended for it, as a request with supersede on that
// is refused replaces nothing. It was ended interrupted first, and the
// new turn then refused: the caller got neither answer.
func TestRefusedTurnInterruptsNothing(t *testing.T) {
	for _, tc := range []struct {
		name string
		// refuse makes the server refuse new turns from now on.
		refuse func(t *testing.T, h *harness, c *client, l *load)
		code   protocol.Code
	}{
		{"saturated", func(t *testing.T, h *harness, c *client, l *load) { l.on.Store(true) }, protocol.CodeOverloaded},
		{"draining", func(t *testing.T, h *harness, c *client, l *load) {
			done := make(chan struct{})
			go func() {
				defer close(done)
				ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
				defer cancel()
				h.srv.Shutdown(ctx)
			}()
			t.Cleanup(func() { <-done })
			for m := c.next(); m.Type != protocol.TypeSessionDraining; m = c.next() {
				require.False(t, protocol.Terminal(m.Type), "t-1 ended before the drain: %s", m.Raw)
			}
		}, protocol.CodeUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			release := make(chan struct{})
			fake := holding(1, release) // t-1 waits in its LLM stage
			pcfg := pipeline.Config{}
			pcfg.LLM.Cap = 8 * time.Second
			l := &load{}
			// t-1: 400 ms of speech, then 800 ms of silence that ends it;
			// then the caller speaks again.
			script := strings.Repeat("S", 20) + strings.Repeat(".", 40) + strings.Repeat("S", 20)
			h := newHarness(t, fake, pcfg, session.Config{MaxBudget: 8 * time.Second, Load: l, Detector: scripted(script)})
			c := h.dial()
			s := c.serverTurns("")
			s.send(make([]int16, 16*20*60))
			for m := c.next(); m.Type != protocol.TypeSpeechStopped; m = c.next() {
			}
			waitStage(t, h, fake, pipeline.StageLLM) // t-1 is being answered
			tc.refuse(t, h, c, l)
			free := sync.OnceFunc(func() { close(release) })
			t.Cleanup(free) // before the drain's wait, should the test fail

			s.send(make([]int16, 16*20*20)) // the caller speaks again
			m := c.next()
			for m.RequestID == "t-1" && !protocol.Terminal(m.Type) {
				m = c.next() // its events so far
			}
			require.Equal(t, "t-2", m.RequestID, "%s", m.Raw)
			require.Equal(t, tc.code, errorOf(t, m).Code, "%s", m.Raw)
			free()
			term, _ := c.terminal("t-1")
			require.Equal(t, protocol.TypeResult, term.Type, "t-1 ended for a turn that was refused: %s", term.Raw)
			if tc.code == protocol.CodeUnavailable {
				// Its last request answered, the draining session closes.
				for {
					if _, _, err := c.conn.Read(h.ctx); err != nil {
						require.Equal(t, websocket.StatusServiceRestart, websocket.CloseStatus(err), "%v", err)
						break
					}
				}
			}
		})
	}
}
