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

// TestReaderNotHeldBySave: a request whose result waits for its history
// save (a slow store) has ended, and the reader must not wait for that
// save whatever the client sends about the request meanwhile, as it does
// not for a cancel (TestCancelDuringSaveDoesNotHoldOthersTerminals). A
// reader that waits holds every message of the session behind it (pings,
// cancels, other requests' frames) for up to the saving request's budget,
// and a request whose first frame it was reading starts with its deadline
// already spent: its terminal goes out late.
//
// Found by a randomized test of the session invariants (seed 92 under load).
func TestReaderNotHeldBySave(t *testing.T) {
	for _, tt := range []struct {
		name    string
		trigger func(t *testing.T, c *client, dl time.Time)
	}{
		// Re-sending the id: the new request replaces the old one.
		{"replace", func(t *testing.T, c *client, dl time.Time) { c.audio("a", 0, true, dl) }},
		// supersede: every new request cancels the ones in flight.
		{"supersede", func(t *testing.T, c *client, dl time.Time) { c.audio("b", 0, true, dl) }},
		// A frame after the final one, of a request that has ended.
		{"frame after final", func(t *testing.T, c *client, dl time.Time) { c.audio("a", 1, true, dl) }},
		// A bad frame (odd byte count) naming the request.
		{"bad frame", func(t *testing.T, c *client, dl time.Time) {
			b, err := protocol.EncodeBinaryAudio(nil, protocol.AudioHeader{RequestID: "a", DeadlineAt: protocol.Millis(dl), Seq: 1}, []int16{1, 2})
			require.NoError(t, err)
			c.sendBinary(b[:len(b)-1])
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var calls atomic.Int32
			fake := &fakeStages{finish: func(ctx context.Context) (string, error) {
				if calls.Add(1) == 1 {
					return "where is my order", nil // answers, then saves
				}
				return blockUntilDone[string](ctx) // ends by its deadline
			}}
			store := slowStore{session.NewMemoryConversations(time.Hour), make(chan struct{}, 1)}
			h := newHarness(t, fake, pipeline.Config{}, session.Config{Conversations: store,
				TerminalMargin: timely.TerminalMargin})
			c := h.dial()
			if tt.name == "supersede" {
				c.sendJSON(protocol.SessionUpdate{Type: protocol.TypeSessionUpdate, Supersede: new(true)})
			}
			c.audio("a", 0, true, time.Now().Add(1500*time.Millisecond))
			select {
			case <-store.saving: // a's result is decided; its save lasts until a's deadline
			case <-h.ctx.Done():
				t.Fatal("a never saved its history")
			}

			dl := time.Now().Add(400 * time.Millisecond)
			tt.trigger(t, c, dl)
			sent := time.Now()
			c.sendJSON(protocol.Ping{Type: protocol.TypePing, ClientTime: 1})
			for {
				m := c.next()
				if m.Type == protocol.TypePong {
					break
				}
			}
			took := time.Since(sent)
			t.Logf("pong %v after the trigger", took)
			require.Less(t, took, 500*time.Millisecond, "the reader waited for a's history save")
			require.EqualValues(t, 0, metricValue(t, h, "voiced_late_terminals_total"))
		})
	}
}
