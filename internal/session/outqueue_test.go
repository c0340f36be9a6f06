package session

import (
	"io"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestOutboundQueue: the outbound queue keeps order, refuses past its
// bound (a slow client), does not grow while a writer keeps up without
// draining it, and a drained queue keeps little memory.
func TestOutboundQueue(t *testing.T) {
	const bound = MinOutboundQueue
	srv := NewServer(Config{OutboundQueue: bound}, drainRunner{}, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	s := newSession(srv, "q", srv.log)
	msg := func(i int) outbound { return outbound{data: []byte{byte(i)}} }
	s.mu.Lock()
	defer s.mu.Unlock()

	// A writer one message behind for a long stream: the array stays
	// within twice the bound.
	next := 0
	for i := range 1000 {
		require.True(t, s.sendLocked(msg(i)))
		if i > 0 {
			o, ok := s.popLocked()
			require.True(t, ok)
			require.Equal(t, byte(next), o.data[0], "in order")
			next++
		}
		require.LessOrEqual(t, cap(s.out), 2*bound)
	}
	o, ok := s.popLocked()
	require.True(t, ok)
	require.Equal(t, byte(next), o.data[0])
	_, ok = s.popLocked()
	require.False(t, ok)
	require.LessOrEqual(t, cap(s.out), keptOutbound, "a drained queue keeps a few entries at most")

	for i := range bound {
		require.True(t, s.sendLocked(msg(i)))
	}
	require.True(t, 2*s.queuedLocked() >= srv.cfg.OutboundQueue, "backlogged")
	require.False(t, s.sendLocked(msg(bound)), "one more message overflows")
	require.NotNil(t, s.kick, "the writer is asked to close at once")
	require.True(t, s.closing)
}
