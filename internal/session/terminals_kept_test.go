package session

import (
	"testing"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/protocol"
)

// TestSlowClientKeepsTerminals: a terminal message is never dropped. When
// the outbound queue overflows (a slow client, closed with 1008), a
// terminal that is queued, or the one whose queueing overflows it, is
// kept for the conversation's next session, like any terminal a closing
// session can no longer send.
func TestSlowClientKeepsTerminals(t *testing.T) {
	for _, tc := range []struct {
		name          string
		terminalFirst bool
	}{
		{"terminal overflows the queue", false},
		{"terminal queued before the overflow", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, srv, pair, s := lateSession(t)
			pong := protocol.Pong{Type: protocol.TypePong}
			if tc.terminalFirst {
				s.refuse("r1", protocol.CodeUnavailable, "test refusal")
			}
			// No connection yet, so no writer: the queue fills as it
			// does behind a writer blocked on a client that reads slowly.
			for range srv.cfg.OutboundQueue {
				s.send(pong)
			}
			if !tc.terminalFirst {
				s.refuse("r1", protocol.CodeUnavailable, "test refusal")
			}
			s.mu.Lock()
			kicked := s.kick != nil
			s.mu.Unlock()
			require.True(t, kicked, "the queue overflowed")

			client := pair.connect(ctx, t, s)
			var got [][]byte
			for {
				_, b, err := client.Read(ctx)
				if err != nil {
					require.Equal(t, websocket.StatusPolicyViolation, websocket.CloseStatus(err))
					break
				}
				got = append(got, b)
			}
			s.writers.Wait()
			// What teardown does once the reader has seen the close.
			s.mu.Lock()
			s.detached = true
			s.mu.Unlock()
			s.flushMissed()

			missed, err := srv.cfg.Conversations.TakeMissed(ctx, s.conv)
			require.NoError(t, err)
			n := 0
			for _, b := range append(got, missed...) {
				if m, err := protocol.DecodeServer(b); err == nil && m.RequestID == "r1" {
					n++
				}
			}
			require.Equal(t, 1, n, "r1's terminal: sent %d messages, kept %d for a resume", len(got), len(missed))
		})
	}
}

// TestMissedHandedToEndingSession: a session that lost its connection
// hands its missed terminals to the live session of its conversation;
// when that session is itself ending (past its last flush, not yet
// detached), they go to the store, not with it.
func TestMissedHandedToEndingSession(t *testing.T) {
	ctx, srv, _, a := lateSession(t)
	b := newSession(srv, "b", srv.log)
	b.conv = a.conv

	// B resumed the conversation, then lost its own connection: its
	// teardown has run up to and including its final flushMissed.
	liveDetached(b)
	b.flushMissed()

	// A, the earlier session, ends now with a terminal its client missed.
	a.mu.Lock()
	a.detached = true
	a.keepMissedLocked([]byte(`{"type":"result","requestId":"r1"}`))
	a.mu.Unlock()
	a.flushMissed()

	// B's serve goes on: detachLive.
	b.detachLive()

	missed, err := srv.cfg.Conversations.TakeMissed(ctx, a.conv)
	require.NoError(t, err)
	require.Len(t, missed, 1, "r1's result is kept for the next resume (B holds %d unflushed)", len(b.missed))
}

// TestNoHandOverAfterLastFlush: a session that found another live and
// hands it a missed terminal just as that one runs its last flush
// (detachLive) is refused, and keeps the terminal itself (for the store),
// rather than have it land where nothing flushes it again.
func TestNoHandOverAfterLastFlush(t *testing.T) {
	_, srv, _, b := lateSession(t)
	liveDetached(b)
	// One that has lost its connection takes none either: it would hold
	// it until its slowest request ends (TestHandedOverToDroppedSessionNotHeld).
	require.False(t, b.handOver([]byte(`{"type":"result","requestId":"r0"}`)), "detached")
	b.mu.Lock()
	b.detached = false
	b.mu.Unlock()
	require.True(t, b.handOver([]byte(`{"type":"result","requestId":"r0"}`)), "before its last flush")
	live := srv.liveSession(b.conv) // what another session's flush looked up
	b.detachLive()
	require.False(t, live.handOver([]byte(`{"type":"result","requestId":"r1"}`)), "after it")
	b.mu.Lock()
	defer b.mu.Unlock()
	require.Empty(t, b.missed, "nothing left where no flush comes")
}

// liveDetached makes s its conversation's live session, one whose
// connection is gone (its teardown running).
func liveDetached(s *Session) {
	s.srv.mu.Lock()
	s.srv.live[s.conv] = s
	s.srv.mu.Unlock()
	s.mu.Lock()
	s.detached = true
	s.mu.Unlock()
}
