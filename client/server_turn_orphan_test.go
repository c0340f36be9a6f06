package client_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/client"
	"github.com/voiced/voiced/internal/protocol"
)

// TestServerTurnOrphanWaitsForItsDeadline: a server turn (named by the
// server, opened by the client from OnUnrouted) whose speech has stopped
// is answering when the connection drops. Its deadline is the server's:
// the end of speech plus its budget, up to maxBudgetMs (3 s here). The
// resumed session hands its result over as soon as it is decided, well
// inside that deadline; the client must wait for it (TerminalGrace after
// the deadline, as documented), not give the turn up TerminalGrace after
// the resume because it never sent a frame with a deadlineAt of its own.
func TestServerTurnOrphanWaitsForItsDeadline(t *testing.T) {
	ctx := testCtx(t)
	extra := map[string]any{"conversationId": "conv-1", "maxBudgetMs": 3000}
	f := newFake(t, nil)
	f.handle = func(n int, w http.ResponseWriter, r *http.Request) {
		switch n {
		case 0:
			extra["resumeToken"] = "tok-1"
			s := accept(t, w, r, extra)
			for {
				_, b, err := s.ws.Read(context.Background())
				if err != nil {
					return
				}
				m, err := protocol.DecodeText(b)
				require.NoError(t, err)
				switch m := m.(type) {
				case *protocol.Ping:
					s.send(protocol.Pong{Type: protocol.TypePong, ClientTime: m.ClientTime, ServerTime: time.Now().UnixMilli()})
				case *protocol.SessionUpdate: // the client streams: a turn
					s.send(map[string]any{"type": protocol.TypeSpeechStarted, "requestId": "t-1", "audioStartMs": 100})
					s.send(map[string]any{"type": protocol.TypeSpeechStopped, "requestId": "t-1", "audioEndMs": 900})
				case *protocol.Playback: // the test's signal: the turn is answering; the network drops
					_ = s.ws.CloseNow()
					return
				}
			}
		case 1:
			extra["resumeToken"], extra["resumed"] = "tok-2", true
			s := accept(t, w, r, extra)
			// The turn's result is decided 600 ms after the resume: inside
			// its deadline (at most 3 s after its end of speech).
			t := time.AfterFunc(600*time.Millisecond, func() { s.send(result("t-1")) })
			defer t.Stop()
			s.serve(nil)
		default:
			http.Error(w, "unexpected", http.StatusInternalServerError)
		}
	}
	stopped := make(chan *client.Request, 1)
	var cp atomic.Pointer[client.Client]
	c, err := client.Dial(ctx, client.Config{URL: f.url(),
		OnUnrouted: func(ev client.Event) {
			if ev.Type == protocol.TypeSpeechStarted {
				r, err := cp.Load().Open(ev.RequestID, func(ev client.Event) {
					if ev.Type == protocol.TypeSpeechStopped {
						stopped <- nil
					}
				})
				require.NoError(t, err)
				stopped <- r
			}
		},
		Reconnect: client.Reconnect{Initial: 10 * time.Millisecond, Max: 20 * time.Millisecond, TerminalGrace: 50 * time.Millisecond}})
	require.NoError(t, err)
	cp.Store(c)
	defer c.Close()
	require.NoError(t, c.Update(ctx, client.SessionUpdate{}))
	turn := <-stopped
	<-stopped // its speech stopped: it is answering
	require.NoError(t, turn.Playback(ctx, 0))

	term, err := turn.Wait(ctx)
	require.NoError(t, err, "given up before its deadline")
	require.Equal(t, client.TypeResult, term.Type)
}
