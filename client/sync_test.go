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

// TestSync: Sync returns once the pong of its ping is read, so a message
// the server sent before the pong has reached its request by then; a
// ping that is never answered leaves Sync to its context.
func TestSync(t *testing.T) {
	for _, c := range []struct {
		name   string
		answer bool // the fake answers the Sync's ping
	}{
		{"answered", true},
		{"never answered", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFake(t, func(n int, w http.ResponseWriter, r *http.Request) {
				s := accept(t, w, r, nil)
				if s == nil {
					return
				}
				for pings := 0; ; {
					_, b, err := s.ws.Read(context.Background())
					if err != nil {
						return
					}
					m, err := protocol.DecodeText(b)
					p, ok := m.(*protocol.Ping)
					if err != nil || !ok {
						continue
					}
					if pings++; pings == 1 { // the clock alignment's
						s.send(protocol.Pong{Type: protocol.TypePong, ClientTime: p.ClientTime, ServerTime: time.Now().UnixMilli()})
						continue
					}
					// The terminal goes first, as the server's queue keeps
					// its order; then, maybe, the pong.
					s.send(result("r1"))
					if c.answer {
						s.send(protocol.Pong{Type: protocol.TypePong, ClientTime: p.ClientTime, ServerTime: time.Now().UnixMilli()})
					}
				}
			})
			ctx := testCtx(t)
			cl, err := client.Dial(ctx, client.Config{URL: f.url(), Pings: 1})
			require.NoError(t, err)
			defer cl.CloseNow()
			got := make(chan client.Event, 1)
			_, err = cl.Open("r1", func(ev client.Event) {
				if ev.Terminal() {
					got <- ev
				}
			})
			require.NoError(t, err)

			sctx := ctx
			if !c.answer {
				var cancel context.CancelFunc
				sctx, cancel = context.WithTimeout(ctx, 300*time.Millisecond)
				defer cancel()
			}
			err = cl.Sync(sctx)
			if !c.answer {
				require.ErrorIs(t, err, context.DeadlineExceeded)
				return
			}
			require.NoError(t, err)
			select {
			case ev := <-got:
				require.Equal(t, client.TypeResult, ev.Type)
			default:
				t.Fatal("Sync returned before the terminal sent ahead of its pong reached the request")
			}
		})
	}
}
