package client_test

import (
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/voiced/voiced/client"
	"github.com/voiced/voiced/internal/protocol"
)

// TestOrphanWaitsThroughASecondOutageWithoutPings is
// TestOrphanWaitsThroughASecondOutage with Pings negative (and no
// keep-alive): no clock-alignment pong marked where the second resume's
// replay ended, so the orphan, whose wait had run out during the outage,
// was given up as the session opened, before the replayed terminal was
// read, and that terminal went to OnUnrouted.
func TestOrphanWaitsThroughASecondOutageWithoutPings(t *testing.T) {
	// After the fake server's cleanup: registered first, run last.
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) })
	ctx := testCtx(t)
	gate := make(chan struct{}) // closed when the second outage ends
	f := newFake(t, nil)
	f.handle = func(n int, w http.ResponseWriter, r *http.Request) {
		switch n {
		case 0:
			s := accept(t, w, r, map[string]any{"conversationId": "conv", "resumeToken": "tok-1"})
			s.serve(func(h protocol.AudioHeader) bool { return !h.Final }) // drops on the final frame
		case 1:
			// Resumed, the terminal not ready yet; drops at the first
			// message or soon after session.ready.
			s := accept(t, w, r, map[string]any{"conversationId": "conv", "resumeToken": "tok-2", "resumed": true})
			drop := time.AfterFunc(20*time.Millisecond, func() { _ = s.ws.CloseNow() })
			defer drop.Stop()
			s.serve(func(protocol.AudioHeader) bool { return false })
		default:
			select { // the outage
			case <-gate:
			case <-ctx.Done():
				return
			}
			s := accept(t, w, r, map[string]any{"conversationId": "conv", "resumeToken": "tok-3", "resumed": true})
			s.send(result("r1")) // the missed terminal, replayed
			s.serve(nil)
		}
	}
	const grace = 50 * time.Millisecond
	var unrouted atomic.Int32
	connects := make(chan client.SessionReady, 4)
	c, err := client.Dial(ctx, client.Config{URL: f.url(), Pings: -1, KeepAlive: -1,
		OnConnect:  func(r client.SessionReady) { connects <- r },
		OnUnrouted: func(client.Event) { unrouted.Add(1) },
		Reconnect:  client.Reconnect{Initial: 5 * time.Millisecond, Max: 10 * time.Millisecond, TerminalGrace: grace}})
	require.NoError(t, err)
	defer c.CloseNow()
	<-connects
	r1, err := c.Open("r1", nil)
	require.NoError(t, err)
	deadline := 100 * time.Millisecond
	require.NoError(t, r1.Send(ctx, client.Frame{PCM: tone(1)[0], Final: true, DeadlineAt: c.DeadlineIn(deadline)}))
	next := func() client.SessionReady {
		select {
		case r := <-connects:
			return r
		case <-ctx.Done():
			t.Fatal("no reconnection")
			return client.SessionReady{}
		}
	}
	require.True(t, next().Resumed) // the first resume; the second outage begins

	// The second outage lasts well past the deadline plus the grace (or
	// until the bug shows).
	bound := time.NewTimer(deadline + grace + time.Second)
	defer bound.Stop()
	select {
	case <-r1.Done():
	case <-bound.C:
	}
	close(gate)
	require.True(t, next().Resumed)

	term, err := r1.Wait(ctx)
	require.NoError(t, err, "r1 was given up at the second resume; its replayed terminal went to OnUnrouted (%d unrouted)", unrouted.Load())
	require.Equal(t, client.TypeResult, term.Type)
	require.True(t, term.Replayed)
	require.NoError(t, c.Close())
}
