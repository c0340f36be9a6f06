package session_test

import (
	"bufio"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/pipeline"
	"github.com/voiced/voiced/internal/protocol"
	"github.com/voiced/voiced/internal/session"
	"github.com/voiced/voiced/internal/voicedtest"
)

// TestRefusalLogsTenant: every refusal, of a session before its upgrade
// (429, 503, 401, 400), of a phone call at its start, or of a request's
// first frame, is logged with the client's tenant, the keyed hash of its
// token, and its address, so that an operator can tell who is refused;
// the token itself is never logged.
func TestRefusalLogsTenant(t *testing.T) {
	const token, secret = "tok-Sup3rS3cret-do-not-log", "refusal log secret"
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte("tenant\x00" + token))
	tenant := hex.EncodeToString(m.Sum(nil)[:12])
	auth := http.Header{"Authorization": {"Bearer " + token}}

	for _, tc := range []struct {
		name   string
		cfg    session.Config
		refuse func(t *testing.T, h *harness, l *load) // makes one refusal
		msg    string
		attr   string // the record's attribute that names the refusal, and its value
		value  string
	}{
		{name: "client limit", cfg: session.Config{MaxSessionsPerClient: 1},
			refuse: func(t *testing.T, h *harness, _ *load) {
				dialOK(t, h, "", auth)
				_, resp := dialAs(t, h, wsURL(h), auth)
				requireClientLimit(t, resp)
			}, msg: "session refused", attr: "outcome", value: "refused_client_limit"},
		{name: "full", cfg: session.Config{MaxSessions: 1},
			refuse: func(t *testing.T, h *harness, _ *load) {
				dialOK(t, h, "", auth)
				_, resp := dialAs(t, h, wsURL(h), auth)
				require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
			}, msg: "session refused", attr: "outcome", value: "refused_full"},
		{name: "saturated",
			refuse: func(t *testing.T, h *harness, l *load) {
				l.on.Store(true)
				_, resp := dialAs(t, h, wsURL(h), auth)
				require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
			}, msg: "session refused", attr: "outcome", value: "refused_saturated"},
		{name: "bad resume token",
			refuse: func(t *testing.T, h *harness, _ *load) {
				_, resp := dialAs(t, h, wsURL(h)+"?access_token="+token+"&resume=forged", nil) // the token in the URL
				require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
			}, msg: "session refused", attr: "outcome", value: "refused_resume"},
		{name: "subprotocol",
			refuse: func(t *testing.T, h *harness, _ *load) {
				_, resp, err := websocket.Dial(h.ctx, wsURL(h), &websocket.DialOptions{HTTPHeader: auth, Subprotocols: []string{"other.v1"}})
				require.Error(t, err)
				require.Equal(t, http.StatusBadRequest, resp.StatusCode)
			}, msg: "session refused", attr: "outcome", value: "refused_protocol"},
		{name: "call past the client limit at its start", cfg: session.Config{MaxSessionsPerClient: 1, Greeting: "-"},
			refuse: func(t *testing.T, h *harness, _ *load) {
				dialOK(t, h, "", auth)
				hs := httptest.NewServer(http.HandlerFunc(h.srv.ServeTwilio))
				t.Cleanup(hs.Close)
				tw := dialTwilioAt(t, h, "ws"+strings.TrimPrefix(hs.URL, "http")+"/v1/twilio")
				tw.start(map[string]string{"token": token})
				for range tw.msgs {
				}
				<-tw.done
				require.Equal(t, websocket.StatusPolicyViolation, websocket.CloseStatus(tw.closeErr), "%v", tw.closeErr)
			}, msg: "phone call refused: its token's client holds -max-sessions-per-client sessions", attr: "outcome", value: "refused_client_limit"},
		{name: "request overloaded",
			refuse: func(t *testing.T, h *harness, l *load) {
				c := dialOK(t, h, "", auth)
				l.on.Store(true)
				c.audio("r1", 0, true, time.Now().Add(5*time.Second))
				term, _ := c.terminal("r1")
				require.Equal(t, protocol.CodeOverloaded, errorOf(t, term).Code)
			}, msg: "bad input", attr: "code", value: string(protocol.CodeOverloaded)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := &load{}
			cfg := tc.cfg
			cfg.Tokens, cfg.ResumeSecret, cfg.Load = []string{token}, []byte(secret), l
			h, logs := newLoggedHarness(t, cfg)
			tc.refuse(t, h, l)
			var rec map[string]any
			require.Eventually(t, func() bool {
				rec = findRecord(t, logs.String(), tc.msg, tc.attr, tc.value)
				return rec != nil
			}, testTimeout, time.Millisecond, "no record %q with %s=%s in\n%s", tc.msg, tc.attr, tc.value, logs)
			require.Equal(t, tenant, rec["tenant"], "the refused client's tenant: %v", rec)
			require.Equal(t, "127.0.0.1", rec["addr"], "the refused client's address: %v", rec)
			require.NotContains(t, logs.String(), token, "the access token logged")
		})
	}
}

// newLoggedHarness is newHarness logging at debug level, as JSON, to the
// buffer it returns.
func newLoggedHarness(t *testing.T, cfg session.Config) (*harness, *voicedtest.LogBuffer) {
	t.Helper()
	logs := new(voicedtest.LogBuffer)
	reg := prometheus.NewRegistry()
	fake := &fakeStages{}
	pl, err := pipeline.New(pipeline.Config{}, pipeline.Stages{STT: fake, Intent: fake, Retrieval: fake, LLM: fake}, pipeline.NewMetrics(reg))
	require.NoError(t, err)
	srv := session.NewServer(cfg, pl, slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})), session.NewMetrics(reg))
	hs := httptest.NewServer(srv)
	t.Cleanup(func() {
		require.NoError(t, srv.Close())
		hs.Close()
	})
	return &harness{t: t, ctx: t.Context(), srv: srv, http: hs, fake: fake, reg: reg}, logs
}

// wsURL is h's WebSocket URL.
func wsURL(h *harness) string { return "ws" + strings.TrimPrefix(h.http.URL, "http") }

// dialOK opens a session at h's URL with query and headers hdr.
func dialOK(t *testing.T, h *harness, query string, hdr http.Header) *client {
	t.Helper()
	c, resp := dialAs(t, h, wsURL(h)+query, hdr)
	require.NotNil(t, c, "refused: %d", resp.StatusCode)
	return c
}

// findRecord returns the first JSON log record of logs with the message
// msg and attribute attr equal to value, or nil.
func findRecord(t *testing.T, logs, msg, attr, value string) map[string]any {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(logs))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var rec map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &rec), sc.Text())
		if rec["msg"] == msg && rec[attr] == value {
			return rec
		}
	}
	return nil
}

// TestRequestAddrAtDebugOnly: a request's log lines carry its client's
// tenant, and its address only at debug level ("request ended"), as a
// refusal's: an address is personal data, which info and warning lines
// (the answer under -log-transcripts, an engine's failure) must not carry.
func TestRequestAddrAtDebugOnly(t *testing.T) {
	const token, secret = "tok-request-log", "request log secret"
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte("tenant\x00" + token))
	tenant := hex.EncodeToString(m.Sum(nil)[:12])
	h, logs := newLoggedHarness(t, session.Config{Tokens: []string{token}, ResumeSecret: []byte(secret), LogTranscripts: true})
	c := dialOK(t, h, "", http.Header{"Authorization": {"Bearer " + token}})
	c.audio("r1", 0, true, time.Now().Add(5*time.Second))
	term, _ := c.terminal("r1")
	require.Equal(t, protocol.TypeResult, term.Type, "%s", term.Raw)

	var ended, answered map[string]any
	require.Eventually(t, func() bool {
		ended = findRecord(t, logs.String(), "request ended", "request", "r1")
		answered = findRecord(t, logs.String(), "answered", "request", "r1")
		return ended != nil && answered != nil
	}, testTimeout, time.Millisecond, "no records of r1's end and answer in\n%s", logs)
	require.Equal(t, "127.0.0.1", ended["addr"], "the debug line names the client: %v", ended)
	require.Equal(t, tenant, answered["tenant"], "%v", answered)
	require.NotContains(t, answered, "addr", "the info line names the client's address: %v", answered)
}

// TestCallRefusedAtStartLogged: a phone call refused for its token, a bad
// one in its start or none in time, is logged with its address like every
// other refusal (no tenant: the token is none of the server's), without
// the token.
func TestCallRefusedAtStartLogged(t *testing.T) {
	const token, bad = "tok-call-start", "tok-not-the-servers"
	for _, tc := range []struct {
		name   string
		params map[string]string // the start's; nil: no start
	}{
		{"a bad token in the start", map[string]string{"token": bad}},
		{"no start in time", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, logs := newLoggedHarness(t, session.Config{Tokens: []string{token}, Greeting: "-", CallStartTimeout: 50 * time.Millisecond})
			tw := dialTwilio(t, h, "")
			if tc.params != nil {
				tw.start(tc.params)
			}
			for range tw.msgs {
			}
			<-tw.done
			require.Equal(t, websocket.StatusPolicyViolation, websocket.CloseStatus(tw.closeErr), "%v", tw.closeErr)
			var rec map[string]any
			require.Eventually(t, func() bool {
				rec = findRecord(t, logs.String(), "phone call refused", "outcome", "refused_auth")
				return rec != nil
			}, testTimeout, time.Millisecond, "no record of the refusal in\n%s", logs)
			require.Equal(t, "127.0.0.1", rec["addr"], "%v", rec)
			require.NotContains(t, rec, "tenant", "%v", rec)
			require.NotContains(t, logs.String(), bad, "the token logged")
		})
	}
}
