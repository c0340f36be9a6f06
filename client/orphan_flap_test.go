package client_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/client"
	"github.com/voiced/voiced/internal/protocol"
)

// TestOrphanGiveUpSurvivesFlapping: the instance that ran a request is
// killed after its final frame, and every later session resumes the
// conversation without its terminal, then drops again after a few tens of
// milliseconds: a connection that flaps faster than TerminalGrace. The
// request's give-up is anchored to its own deadline plus the grace: each
// resume must not start the grace afresh, or the request (and its
// MaxWaiting place) waits for ever. Before the fix Wait ran into the
// test's bound.
func TestOrphanGiveUpSurvivesFlapping(t *testing.T) {
	ctx := testCtx(t)
	const (
		grace = 200 * time.Millisecond
		up    = 30 * time.Millisecond // how long each resumed connection lasts
	)
	f := newFake(t, nil)
	f.handle = func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 0 {
			s := accept(t, w, r, map[string]any{"conversationId": "conv-1", "resumeToken": "tok"})
			s.serve(func(h protocol.AudioHeader) bool { return !h.Final }) // killed
			return
		}
		s := accept(t, w, r, map[string]any{"conversationId": "conv-1", "resumeToken": "tok", "resumed": true})
		if s == nil {
			return
		}
		drop := time.AfterFunc(up, func() { _ = s.ws.CloseNow() })
		defer drop.Stop()
		s.serve(nil)
	}
	c, err := client.Dial(ctx, client.Config{URL: f.url(), Pings: 1,
		Reconnect: client.Reconnect{Initial: 5 * time.Millisecond, Max: 10 * time.Millisecond, TerminalGrace: grace}})
	require.NoError(t, err)
	defer c.Close()
	r, err := c.Open("r1", nil)
	require.NoError(t, err)
	deadline := c.DeadlineIn(300 * time.Millisecond)
	require.NoError(t, r.Send(ctx, client.Frame{PCM: tone(1)[0], Final: true, DeadlineAt: deadline}))

	wctx, cancel := context.WithTimeout(ctx, 4*time.Second)
	defer cancel()
	_, err = r.Wait(wctx)
	require.ErrorIs(t, err, client.ErrConnectionLost, "still waiting %d ms past its deadline", c.ServerTime(time.Now())-deadline)
	// ServerTime is in whole milliseconds, by a clock offset measured
	// again at each resume: a few milliseconds either way are that.
	require.GreaterOrEqual(t, c.ServerTime(time.Now()), deadline+grace.Milliseconds()-20, "given up before its deadline and the grace")
}
