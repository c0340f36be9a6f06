package session_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/pipeline"
	"github.com/voiced/voiced/internal/session"
)

// TestUnauthorizedChallenge: every 401 before the upgrade carries the
// challenge RFC 9110 (15.5.2) requires of it, WWW-Authenticate: Bearer,
// a bad resume token's and a phone call's bad URL token's as well as a
// session's bad access token's, with its plain-text body.
func TestUnauthorizedChallenge(t *testing.T) {
	h := newHarness(t, &fakeStages{}, pipeline.Config{}, session.Config{Tokens: []string{"alice"}})
	calls := httptest.NewServer(http.HandlerFunc(h.srv.ServeTwilio))
	t.Cleanup(calls.Close)
	for _, tc := range []struct{ name, url, body string }{
		{"access token", wsURL(h) + "?access_token=mallory", "missing or invalid access token"},
		{"resume token", wsURL(h) + "?access_token=alice&resume=forged", "resume token malformed"},
		{"phone call's URL token", "ws" + strings.TrimPrefix(calls.URL, "http") + "/v1/twilio?token=mallory", "missing or invalid access token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, resp, err := websocket.Dial(h.ctx, tc.url, nil)
			require.Error(t, err)
			require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
			require.Equal(t, `Bearer realm="voiced"`, resp.Header.Get("WWW-Authenticate"))
			body, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			require.True(t, strings.HasPrefix(string(body), tc.body), "body %q", body)
		})
	}
}
