package loadgen

import (
	"encoding/json"
	"math"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/protocol"
)

// TestConfigRefused: settings that make a run's figures meaningless are
// refused. NaN passes every "< 0" and "> 100" check, so -max-error-share
// NaN was accepted and then no share of unplanned errors ever failed the
// run (share > NaN is false); NaN mix shares and rates were accepted too.
// In open loop (-rate) a session's turns overlap, and a barge-in turn
// switches supersede on for the whole session: the server then rightly
// ends the other turns' requests "replaced", which they do not plan for,
// and the run failed against a correct server.
func TestConfigRefused(t *testing.T) {
	nan := math.NaN()
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"max error share", Config{Addr: "127.0.0.1:1", MaxErrorShare: nan}},
		{"mix share", Config{Addr: "127.0.0.1:1", Mix: Mix{Cancel: nan}}},
		{"rate", Config{Addr: "127.0.0.1:1", Rate: nan}},
		{"infinite rate", Config{Addr: "127.0.0.1:1", Rate: math.Inf(1)}},
		{"open loop with barge-in", Config{Addr: "127.0.0.1:1", Rate: 50, Mix: Mix{BargeIn: 50}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Run(testCtx(t), tc.cfg)
			require.ErrorIs(t, err, ErrConfig)
		})
	}
}

// TestGaveUpIsNotMissing: with -resume, the server closes the session
// (1012) after the request's final frame and refuses the resume (403),
// so the client gives up. The request got no terminal because its
// session was never resumed (Resume.GaveUp reports that), not because a
// live connection missed it: it was counted in Invariants.Missing, "no
// terminal message by deadline plus grace, connection still up".
func TestGaveUpIsNotMissing(t *testing.T) {
	srv := drainingServer(t, http.StatusForbidden)
	cfg := quick(addrOf(srv))
	cfg.Sessions, cfg.Requests, cfg.Resume, cfg.MetricsURL = 1, 1, true, "off"
	cfg.Ramp, cfg.Think = time.Millisecond, time.Millisecond
	rep, err := Run(testCtx(t), cfg)
	require.NoError(t, err)
	t.Logf("missing %d, server closed %d, resume %+v, violations %v", rep.Invariants.Missing, rep.Requests.ServerClosed, *rep.Resume, rep.Violations)
	require.Equal(t, 1, rep.Resume.GaveUp)
	require.Equal(t, 1, rep.Resume.Missed)
	require.Zero(t, rep.Invariants.Missing, "its session was never resumed: not a terminal missed on a live connection")
	require.Equal(t, 1, rep.Resume.LostNotResumed)
}

// TestResumeTimeoutIsNotMissing: the session is closed (1012) after the
// final frame and every resume is answered 503, so the client is still
// retrying when awaitSession's resumeTimeout (here 2 s) passes and the slot
// gives the session up (Resume.GaveUp). The request's session was never
// resumed, exactly as when the client gives up by itself
// (TestGaveUpIsNotMissing), yet close() only marks its attempts gone when
// the client has already ended: the request is counted missing.
func TestResumeTimeoutIsNotMissing(t *testing.T) {
	cfg := quick(addrOf(drainingServer(t, http.StatusServiceUnavailable)))
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

// drainingServer closes the session with 1012 after the request's final
// frame, and answers every resume with resumeStatus: 403 makes the client
// give up at once; 503 (with Retry-After: 1) keeps it trying (about 20 s
// with resumePolicy), never resumed.
func drainingServer(t *testing.T, resumeStatus int) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("resume") != "" {
			w.Header().Set("Retry-After", "1")
			http.Error(w, "no resume here", resumeStatus)
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
