package session_test

import (
	"crypto/hmac"
	"crypto/sha1"
	"encoding/base64"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/coder/websocket"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/pipeline"
	"github.com/voiced/voiced/internal/session"
	"github.com/voiced/voiced/internal/voicedtest"
)

// twilioSign is Twilio's signature of a handshake to u, computed here
// rather than by the code under test: base64(HMAC-SHA1(token, u)).
func twilioSign(token, u string) string {
	m := hmac.New(sha1.New, []byte(token))
	m.Write([]byte(u))
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// TestTwilioSignature: with -twilio.auth-token, a call's handshake must
// carry Twilio's X-Twilio-Signature of the URL Twilio requested (its
// query unsorted and as encoded): a call without it, or signed for
// another URL or with another key, is refused with 403 before the
// upgrade, counted as refused_signature; a signed call needs no bearer
// token. Behind a tunnel the URL is -twilio.public-url, or the forwarded
// scheme and host when trusted, never when not. The auth token shows in
// no log line and no response.
func TestTwilioSignature(t *testing.T) {
	const (
		authToken = "tw-auth-s3cret"
		query     = "?b=2&a=x%20y" // not sorted, a space encoded as Twilio wrote it
		public    = "wss://abcd.trycloudflare.com/v1/twilio"
	)
	forwarded := http.Header{"X-Forwarded-Proto": {"https"}, "X-Forwarded-Host": {"abcd.trycloudflare.com"}}
	for _, tc := range []struct {
		name    string
		cfg     session.Config
		signed  func(local string) string // the URL signed, given the one dialled
		key     string
		headers http.Header
		ok      bool
	}{
		{name: "signed", signed: func(l string) string { return l }, key: authToken, ok: true},
		{name: "no signature", key: ""},
		{name: "other key", signed: func(l string) string { return l }, key: "another-token"},
		{name: "query sorted", signed: func(l string) string { return strings.Replace(l, query, "?a=x%20y&b=2", 1) }, key: authToken},
		{name: "query decoded", signed: func(l string) string { return strings.Replace(l, "%20", " ", 1) }, key: authToken},
		{name: "https for ws", signed: func(l string) string { return "https" + strings.TrimPrefix(l, "ws") }, key: authToken},
		{name: "public URL", cfg: session.Config{TwilioPublicURL: public},
			signed: func(string) string { return public + query }, key: authToken, ok: true},
		{name: "public host, request's path", cfg: session.Config{TwilioPublicURL: "wss://abcd.trycloudflare.com"},
			signed: func(string) string { return public + query }, key: authToken, ok: true},
		{name: "local URL when public set", cfg: session.Config{TwilioPublicURL: public},
			signed: func(l string) string { return l }, key: authToken},
		{name: "forwarded, trusted", cfg: session.Config{TwilioTrustForwarded: true}, headers: forwarded,
			signed: func(string) string { return public + query }, key: authToken, ok: true},
		{name: "forwarded, not trusted", headers: forwarded,
			signed: func(string) string { return public + query }, key: authToken},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs voicedtest.LogBuffer
			reg := prometheus.NewRegistry()
			fake := &fakeStages{}
			pl, err := pipeline.New(pipeline.Config{}, pipeline.Stages{STT: fake, Intent: fake, Retrieval: fake, LLM: fake}, pipeline.NewMetrics(reg))
			require.NoError(t, err)
			cfg := tc.cfg
			cfg.TwilioAuthToken, cfg.Tokens, cfg.Greeting = authToken, []string{"bearer-token"}, "-"
			srv := session.NewServer(cfg, pl, slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})), session.NewMetrics(reg))
			hs := httptest.NewServer(http.HandlerFunc(srv.ServeTwilio))
			h := &harness{t: t, ctx: t.Context(), srv: srv, http: hs, fake: fake, reg: reg}
			local := "ws" + strings.TrimPrefix(hs.URL, "http") + "/v1/twilio" + query
			hdr := tc.headers.Clone()
			if hdr == nil {
				hdr = http.Header{}
			}
			if tc.key != "" {
				// Lower case, as Twilio sends it on WebSocket handshakes.
				hdr["x-twilio-signature"] = []string{twilioSign(tc.key, tc.signed(local))}
			}
			opts := &websocket.DialOptions{HTTPHeader: hdr}
			if tc.ok {
				tw := dialTwilioWith(t, h, local, opts)
				tw.start(nil) // no token: the signature authenticates
				tw.stopAndWait()
				require.Equal(t, websocket.StatusNormalClosure, websocket.CloseStatus(tw.closeErr), "%v", tw.closeErr)
				require.Zero(t, metricValue(t, h, `voiced_session_upgrades_total{outcome="refused_auth"}`))
			} else {
				conn, resp, err := websocket.Dial(h.ctx, local, opts)
				if conn != nil {
					conn.CloseNow()
				}
				require.Error(t, err)
				require.NotNil(t, resp, "%v", err)
				require.Equal(t, http.StatusForbidden, resp.StatusCode)
				body, _ := io.ReadAll(resp.Body)
				require.Contains(t, string(body), "X-Twilio-Signature")
				require.NotContains(t, string(body), authToken)
				require.Equal(t, 1.0, metricValue(t, h, `voiced_session_upgrades_total{outcome="refused_signature"}`))
			}
			require.NoError(t, srv.Close())
			hs.Close()
			require.NotContains(t, logs.String(), authToken)
			require.NotContains(t, logs.String(), "x%20y", "the query, which may hold a token, logged")
		})
	}
}
