package session

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/protocol"
)

// hookReplaced runs fn once, in the reader, when a request ends replaced
// (between a superseding request's check for a drain and its start).
type hookReplaced struct {
	once *sync.Once
	fn   func()
}

func (h hookReplaced) Enabled(context.Context, slog.Level) bool { return true }
func (h hookReplaced) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h hookReplaced) WithGroup(string) slog.Handler            { return h }
func (h hookReplaced) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "request ended" {
		return nil
	}
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "cause" && a.Value.String() == "replaced" {
			h.once.Do(h.fn)
			return false
		}
		return true
	})
	return nil
}

// TestReplacingRequestAfterDrainClose: a superseding request checked for
// a drain (none), ended the request in flight, and the drain began; by
// the time the replaced request left the registry the drain's linger was
// over, so its finish queued the 1012 close (no request in flight). The
// new request must not then be registered on a session whose close is
// queued: nothing would ever send its terminal before the close. It is
// refused with unavailable, ahead of the close, like any request read
// once the close is queued (TestRequestAfterDrainClose).
func TestReplacingRequestAfterDrainClose(t *testing.T) {
	ctx, _, pair, s := lateSession(t)
	s.supersede = true
	s.log = slog.New(hookReplaced{once: &sync.Once{}, fn: func() {
		s.drain(time.Second)
		// The reader was held up past the linger (a loaded machine): the
		// replaced request's finish finds the drain ready to close.
		s.mu.Lock()
		s.lingerUntil = time.Now()
		s.mu.Unlock()
	}})
	endRequestsAtCleanup(t, s)
	frame := func(id string) { finalFrame(ctx, t, s, id) }
	frame("r1")
	require.Equal(t, 1, s.reqs.Len())
	frame("r2")
	s.mu.Lock()
	closing := s.closing
	s.mu.Unlock()
	require.True(t, closing, "the drain's close is queued")
	require.Zero(t, s.reqs.Len(), "r2 must not be accepted after the session's close was queued")

	client := pair.connect(ctx, t, s)
	require.Equal(t, protocol.TypeSessionDraining, readType(t, readMsg(ctx, t, client)))
	b := readMsg(ctx, t, client)
	m, err := protocol.DecodeServer(b)
	require.NoError(t, err)
	var e protocol.ErrorMessage
	require.NoError(t, m.As(&e))
	require.Equal(t, "r1", e.RequestID)
	require.Equal(t, protocol.CodeReplaced, e.Code)
	requireUnavailable(t, readMsg(ctx, t, client), "r2")
	_, _, err = client.Read(ctx)
	require.Equal(t, websocket.StatusServiceRestart, websocket.CloseStatus(err))
	s.writers.Wait()
}
