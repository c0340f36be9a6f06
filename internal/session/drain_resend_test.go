package session

import (
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/cancel"
	"github.com/voiced/voiced/internal/protocol"
)

// TestDrainResendReplaces: re-sending the id of a request whose final
// frame has come replaces it ("the old one ends with replaced, then the
// new one runs"). In a drain the old one ended replaced and the new one
// was refused with unavailable under the same id: the client lost both
// answers, and a client that drops a second terminal for an id never
// even saw the refusal. The new request takes the old one's place, in
// the drain too, and the session closes once it has ended, also when
// the old one was the last in flight and the linger was over (its end
// must not queue the close under the new one).
func TestDrainResendReplaces(t *testing.T) {
	for _, tc := range []struct {
		name       string
		lingerOver bool
	}{{"in the linger", false}, {"after the linger", true}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, _, pair, s := lateSession(t)
			endRequestsAtCleanup(t, s)
			frame := func(id string) { finalFrame(ctx, t, s, id) }
			frame("r1")
			s.drain(time.Second)
			if tc.lingerOver {
				s.mu.Lock()
				s.lingerUntil = time.Now()
				s.mu.Unlock()
			}
			frame("r1") // the same id again: a new utterance
			h, ok := s.reqs.Get("r1")
			require.True(t, ok, "the new r1 is accepted in the old one's place")
			s.mu.Lock()
			closing := s.closing
			s.mu.Unlock()
			require.False(t, closing, "the close is not queued under the new r1")
			s.endRequest(h.Value, cancel.Cancelled, nil)

			client := pair.connect(ctx, t, s)
			require.Equal(t, protocol.TypeSessionDraining, readType(t, readMsg(ctx, t, client)))
			for _, code := range []protocol.Code{protocol.CodeReplaced, protocol.CodeCancelled} {
				m, err := protocol.DecodeServer(readMsg(ctx, t, client))
				require.NoError(t, err)
				var e protocol.ErrorMessage
				require.NoError(t, m.As(&e))
				require.Equal(t, "r1", e.RequestID)
				require.Equal(t, code, e.Code, "r1's terminals, in order: the old one's, then the new one's")
			}
			_, _, err := client.Read(ctx)
			require.Equal(t, websocket.StatusServiceRestart, websocket.CloseStatus(err))
			s.writers.Wait()
		})
	}
}
