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

// TestDrainingDuringHandshakeIsKept: a session.draining that the server
// sends while the client is still aligning its clock (between
// session.ready and the last pong) is a message of the connection that
// has just opened: Draining must report it once Dial returns.
func TestDrainingDuringHandshakeIsKept(t *testing.T) {
	ctx := testCtx(t)
	f := newFake(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		s := accept(t, w, r, nil)
		if s == nil {
			return
		}
		// Before the first ping is read: the client reads it before the pong.
		s.send(map[string]any{"type": "session.draining", "closeInMs": 5000})
		s.serve(nil)
	})
	var unrouted []string
	c, err := client.Dial(ctx, client.Config{URL: f.url(), Pings: 1, Reconnect: client.Reconnect{Disabled: true},
		OnUnrouted: func(ev client.Event) { unrouted = append(unrouted, ev.Type) }})
	require.NoError(t, err)
	defer c.CloseNow()
	require.Equal(t, []string{client.TypeSessionDraining}, unrouted, "the client read session.draining during the handshake")
	require.True(t, c.Draining(), "session.draining of the current connection was forgotten")
}

// TestOrphanWaitsThroughASecondOutage: a request of the first
// connection is orphaned by the first resume (its terminal not replayed
// yet); the resumed connection drops too, and the outage lasts past the
// request's deadline plus TerminalGrace. The next resumed session
// replays the terminal: it must reach the request, which must not have
// been given up while there was no session to receive it on. With Pings
// negative (and no keep-alive) as well: a resumed session still sends
// one ping, whose pong marks where the replay ends; without it the
// orphan, whose wait had run out during the outage, was given up as the
// session opened, and its replayed terminal went to OnUnrouted.
func TestOrphanWaitsThroughASecondOutage(t *testing.T) {
	for _, tc := range []struct {
		name      string
		pings     int
		keepAlive time.Duration
	}{
		{"pings", 1, 0},
		{"no pings", -1, -1},
	} {
		t.Run(tc.name, func(t *testing.T) { orphanWaitsThroughASecondOutage(t, tc.pings, tc.keepAlive) })
	}
}

func orphanWaitsThroughASecondOutage(t *testing.T, pings int, keepAlive time.Duration) {
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
			// Resumed, the terminal not ready yet; drops right after the
			// handshake's one ping.
			s := accept(t, w, r, map[string]any{"conversationId": "conv", "resumeToken": "tok-2", "resumed": true})
			_, b, err := s.ws.Read(ctx)
			if err != nil {
				return
			}
			m, err := protocol.DecodeText(b)
			require.NoError(t, err)
			s.send(protocol.Pong{Type: protocol.TypePong, ClientTime: m.(*protocol.Ping).ClientTime, ServerTime: time.Now().UnixMilli()})
			_ = s.ws.CloseNow()
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
	c, err := client.Dial(ctx, client.Config{URL: f.url(), Pings: pings, KeepAlive: keepAlive,
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
	require.NoError(t, err, "r1 was given up during the outage or at the second resume; its replayed terminal went to OnUnrouted (%d unrouted)", unrouted.Load())
	require.Equal(t, client.TypeResult, term.Type)
	require.True(t, term.Replayed)
	require.NoError(t, c.Close())
}

// TestSyncOfALostConnectionIsNotABarrier: a Sync whose ping is lost with
// its connection cannot have read what that connection's server sent
// before the pong; it returned nil as soon as a Sync on the next
// connection got its pong (pongs wake every earlier clientTime).
func TestSyncOfALostConnectionIsNotABarrier(t *testing.T) {
	ctx := testCtx(t)
	f := newFake(t, nil)
	f.handle = func(n int, w http.ResponseWriter, r *http.Request) {
		s := accept(t, w, r, nil)
		if n > 0 {
			s.serve(nil)
			return
		}
		// Answers the handshake's ping, then drops at the next one.
		for pings := 0; ; pings++ {
			_, b, err := s.ws.Read(ctx)
			if err != nil {
				return
			}
			m, err := protocol.DecodeText(b)
			require.NoError(t, err)
			if pings > 0 {
				_ = s.ws.CloseNow()
				return
			}
			s.send(protocol.Pong{Type: protocol.TypePong, ClientTime: m.(*protocol.Ping).ClientTime, ServerTime: time.Now().UnixMilli()})
		}
	}
	connects := make(chan struct{}, 4)
	c, err := client.Dial(ctx, client.Config{URL: f.url(), Pings: 1, OnConnect: func(client.SessionReady) { connects <- struct{}{} },
		Reconnect: client.Reconnect{Initial: 5 * time.Millisecond, Max: 10 * time.Millisecond}})
	require.NoError(t, err)
	defer c.CloseNow()
	<-connects
	lost := make(chan error, 1)
	go func() { lost <- c.Sync(ctx) }() // its ping is lost with the connection
	<-connects                          // the next connection
	require.NoError(t, c.Sync(ctx))
	select {
	case err := <-lost:
		require.ErrorIs(t, err, client.ErrConnectionLost, "a Sync whose pong never came reported success")
	case <-ctx.Done():
		t.Fatal("the Sync of the lost connection never returned")
	}
}
