package client_test

import (
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/client"
)

// TestKeepAliveDropsASilentConnection: a connection whose server stops
// answering without closing it (a half-open TCP connection after the
// client's network changed) is dropped once a keep-alive ping goes
// unanswered, and the client reconnects; without the keep-alive it
// waited for the kernel's TCP timeouts, minutes.
func TestKeepAliveDropsASilentConnection(t *testing.T) {
	ctx := testCtx(t)
	silent := make(chan struct{})
	defer close(silent)
	f := newFake(t, func(n int, w http.ResponseWriter, r *http.Request) {
		s := accept(t, w, r, map[string]any{"conversationId": "conv-1", "resumeToken": "tok"})
		if s == nil {
			return
		}
		if n == 0 {
			<-silent // reads nothing, answers nothing, keeps the connection
			return
		}
		s.serve(nil)
	})
	var mu sync.Mutex
	var lost []error
	connected := make(chan struct{}, 2)
	c, err := client.Dial(ctx, client.Config{URL: f.url(), Pings: -1, KeepAlive: 100 * time.Millisecond,
		OnDisconnect: func(err error) { mu.Lock(); lost = append(lost, err); mu.Unlock() },
		OnConnect:    func(client.SessionReady) { connected <- struct{}{} }})
	require.NoError(t, err)
	defer c.Close()

	for i := range 2 {
		select {
		case <-connected:
		case <-ctx.Done():
			t.Fatalf("connection %d never made: no reconnection", i+1)
		}
	}
	require.Len(t, f.requests(), 2)
	mu.Lock()
	require.Len(t, lost, 1)
	require.True(t, errors.Is(lost[0], client.ErrNoPong), "%v", lost[0])
	mu.Unlock()
	// The second connection answers its pings: it stays.
	require.NoError(t, c.Sync(ctx))
}
