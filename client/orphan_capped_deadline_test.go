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

// TestOrphanWaitCappedByMaxBudget: a request sent with a generous
// deadlineAt (a minute) loses its connection after its final frame; the
// resume is accepted for the token, same conversationId, "resumed":
// false, but the conversation is genuinely gone (the instance restarted
// with an empty store): its terminal never comes. The server's deadline
// for the request was min(deadlineAt, final frame + maxBudgetMs), 300 ms
// here (protocol.md): the client must give the request up TerminalGrace
// after that, not hold it (and its MaxWaiting place) for the minute it
// asked for. Before the fix Wait ran into the test's 5 s bound.
func TestOrphanWaitCappedByMaxBudget(t *testing.T) {
	ctx := testCtx(t)
	extra := map[string]any{"conversationId": "conv-1", "maxBudgetMs": 300, "resumeToken": "tok-1"}
	f := newFake(t, nil)
	f.handle = func(n int, w http.ResponseWriter, r *http.Request) {
		switch n {
		case 0:
			s := accept(t, w, r, extra)
			// The network drops once the final frame is in.
			s.serve(func(h protocol.AudioHeader) bool { return !h.Final })
		case 1:
			// Same conversation, no history, nothing to hand over.
			s := accept(t, w, r, map[string]any{"conversationId": "conv-1", "maxBudgetMs": 300, "resumeToken": "tok-2"})
			s.serve(nil)
		default:
			http.Error(w, "unexpected", http.StatusInternalServerError)
		}
	}
	c, err := client.Dial(ctx, client.Config{URL: f.url(),
		Reconnect: client.Reconnect{Initial: 10 * time.Millisecond, Max: 20 * time.Millisecond, TerminalGrace: 50 * time.Millisecond}})
	require.NoError(t, err)
	defer c.Close()
	r, err := c.Open("r1", nil)
	require.NoError(t, err)
	sendAll(ctx, t, r, tone(2), c.DeadlineIn(time.Minute))

	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err = r.Wait(wctx)
	require.ErrorIs(t, err, client.ErrConnectionLost, "the server's deadline was 300 ms after the final frame")
}
