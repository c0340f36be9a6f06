package loadgen

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/protocol"
)

// drainingServer closes the session with 1012 after the request's final
// frame, and answers every resume with 503 Retry-After: 1: the client
// keeps trying (about 20 s with resumePolicy) and never resumes.
func drainingServer(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("resume") != "" {
			w.Header().Set("Retry-After", "1")
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{protocol.Name}})
		if err != nil {
			return
		}
		defer ws.CloseNow()
		send := func(v any) {
			b, _ := json.Marshal(v)
			_ = ws.Write(r.Context(), websocket.MessageText, b)
		}
		send(protocol.SessionReady{Type: protocol.TypeSessionReady, Protocol: protocol.Name, SessionID: "s",
			ServerTime: protocol.Millis(time.Now()), MaxBudgetMs: 1700, ResumeToken: "tok", ConversationID: "conv",
			Audio: protocol.AudioFormat{Encoding: protocol.EncodingPCM16LE, SampleRate: 16000, Channels: 1}})
		for {
			typ, b, err := ws.Read(r.Context())
			if err != nil {
				return
			}
			if typ == websocket.MessageBinary {
				if a, err := protocol.DecodeBinaryAudio(b); err == nil && a.Header.Final {
					_ = ws.Close(websocket.StatusServiceRestart, "draining")
					return
				}
				continue
			}
			if m, err := protocol.DecodeText(b); err == nil {
				if p, ok := m.(*protocol.Ping); ok {
					send(protocol.Pong{Type: protocol.TypePong, ClientTime: p.ClientTime, ServerTime: protocol.Millis(time.Now())})
				}
			}
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestResumeTimeoutIsNotMissing: the session is closed (1012) after the
// final frame and every resume is answered 503, so the client is still
// retrying when awaitSession's resumeTimeout (here 2 s) passes and the slot
// gives the session up (Resume.GaveUp). The request's session was never
// resumed, exactly as when the client gives up by itself
// (TestGaveUpIsNotMissing), yet close() only marks its attempts gone when
// the client has already ended: the request is counted missing.
func TestResumeTimeoutIsNotMissing(t *testing.T) {
	cfg := quick(addrOf(drainingServer(t)))
	cfg.resumeTimeout = 2 * time.Second
	cfg.Sessions, cfg.Requests, cfg.Resume, cfg.MetricsURL = 1, 1, true, "off"
	cfg.Ramp, cfg.Think, cfg.Duration = time.Millisecond, time.Millisecond, 10*time.Second
	rep, err := Run(testCtx(t), cfg)
	require.NoError(t, err)
	t.Logf("missing %d, server closed %d, resume %+v, violations %v", rep.Invariants.Missing, rep.Requests.ServerClosed, *rep.Resume, rep.Violations)
	require.Equal(t, 1, rep.Resume.GaveUp)
	require.Equal(t, 1, rep.Resume.Missed)
	require.Zero(t, rep.Invariants.Missing, "its session was never resumed: not a terminal missed on a live connection")
	require.Equal(t, 1, rep.Resume.LostNotResumed)
}
