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

// TestSyncEndsWithErrClosedOnClose: a Sync waiting for its pong when
// the caller closes the client ends because the client was closed
// (ErrClosed, as the requests waiting then do, and as Sync did before
// lost pings were failed), not with ErrConnectionLost, which says the
// connection was lost.
func TestSyncEndsWithErrClosedOnClose(t *testing.T) {
	for _, closeNow := range []bool{false, true} {
		ctx := testCtx(t)
		pinged := make(chan struct{}, 1)
		f := newFake(t, func(_ int, w http.ResponseWriter, r *http.Request) {
			s := accept(t, w, r, nil)
			if s == nil {
				return
			}
			// Answers the handshake's ping only.
			for pings := 0; ; pings++ {
				_, b, err := s.ws.Read(context.Background())
				if err != nil {
					return
				}
				m, err := protocol.DecodeText(b)
				require.NoError(t, err)
				p, ok := m.(*protocol.Ping)
				if !ok {
					continue
				}
				if pings == 0 {
					s.send(protocol.Pong{Type: protocol.TypePong, ClientTime: p.ClientTime, ServerTime: time.Now().UnixMilli()})
					continue
				}
				pinged <- struct{}{}
			}
		})
		c, err := client.Dial(ctx, client.Config{URL: f.url(), Pings: 1})
		require.NoError(t, err)
		res := make(chan error, 1)
		go func() { res <- c.Sync(ctx) }()
		<-pinged
		if closeNow {
			c.CloseNow()
		} else {
			require.NoError(t, c.Close())
		}
		select {
		case err := <-res:
			require.ErrorIs(t, err, client.ErrClosed, "closeNow %v: %v", closeNow, err)
		case <-ctx.Done():
			t.Fatal("Sync never returned")
		}
	}
}
