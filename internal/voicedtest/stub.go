package voicedtest

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/voiced/voiced/internal/protocol"
)

// Stub serves just enough of voiced.v1 for a client's tests of a server
// that misbehaves: session.ready (maxBudgetMs 300), a pong for each ping,
// and, when answer is not nil, answer called on each request's first
// audio frame; nothing else is ever answered. It runs until the test ends.
func Stub(t testing.TB, answer func(ctx context.Context, ws *websocket.Conn, id string)) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{protocol.Name}})
		if err != nil {
			return
		}
		defer ws.CloseNow()
		ready, _ := json.Marshal(protocol.SessionReady{Type: protocol.TypeSessionReady, Protocol: protocol.Name,
			ServerTime: protocol.Millis(time.Now()), MaxBudgetMs: 300})
		if ws.Write(r.Context(), websocket.MessageText, ready) != nil {
			return
		}
		for {
			typ, b, err := ws.Read(r.Context())
			if err != nil {
				return
			}
			if typ == websocket.MessageBinary {
				if a, err := protocol.DecodeBinaryAudio(b); err == nil && a.Header.Seq == 0 && answer != nil {
					answer(r.Context(), ws, a.Header.RequestID)
				}
				continue
			}
			if m, err := protocol.DecodeText(b); err == nil {
				if p, ok := m.(*protocol.Ping); ok {
					pong, _ := json.Marshal(protocol.Pong{Type: protocol.TypePong, ClientTime: p.ClientTime, ServerTime: protocol.Millis(time.Now())})
					_ = ws.Write(r.Context(), websocket.MessageText, pong)
				}
			}
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}
