package session_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/pipeline"
	"github.com/voiced/voiced/internal/session"
)

// TestTwilioUnauthenticatedCallsBounded: a call may upgrade without a
// token (Twilio sends it in start), so anyone who can reach the server
// could open calls that never authenticate. Each held a session slot for
// CallStartTimeout, and enough of them (one client, reconnecting) kept
// the server at -max-sessions: every authenticated client got 503 and
// /readyz said full. At most a quarter of the slots wait for a start's
// token now; more such calls get 503, and authenticated sessions and
// calls are still admitted.
func TestTwilioUnauthenticatedCallsBounded(t *testing.T) {
	const maxSessions = 8
	h := newHarness(t, &fakeStages{}, pipeline.Config{}, session.Config{Tokens: []string{"secret"}, MaxSessions: maxSessions})
	hs := httptest.NewServer(http.HandlerFunc(h.srv.ServeTwilio))
	t.Cleanup(hs.Close)
	url := "ws" + strings.TrimPrefix(hs.URL, "http") + "/v1/twilio"

	var waiting []*websocket.Conn
	for range maxSessions {
		conn, resp, err := websocket.Dial(h.ctx, url, nil)
		if err != nil {
			require.NotNil(t, resp, "%v", err)
			require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
			continue
		}
		t.Cleanup(func() { conn.CloseNow() })
		waiting = append(waiting, conn)
	}
	require.Len(t, waiting, maxSessions/4, "calls waiting for a token")
	require.Equal(t, float64(maxSessions-maxSessions/4), metricValue(t, h, `voiced_session_upgrades_total{outcome="refused_unauthenticated"}`))

	// The rest of the server is free for clients with the token.
	c := h.dialWith("ws"+strings.TrimPrefix(h.http.URL, "http"), &websocket.DialOptions{
		HTTPHeader: http.Header{"Authorization": {"Bearer secret"}},
	})
	defer c.conn.CloseNow()
	tw := dialTwilio(t, h, "?token=secret")
	tw.start(nil)

	// A call that ends, or authenticates in its start, frees its place.
	for _, conn := range waiting {
		conn.CloseNow()
	}
	require.Eventually(t, func() bool { return metricValue(t, h, "voiced_sessions") == 2 }, testTimeout, 5*time.Millisecond)
	for range maxSessions / 4 {
		dialTwilio(t, h, "").start(map[string]string{"token": "secret"})
	}
	require.Eventually(t, func() bool {
		conn, _, err := websocket.Dial(h.ctx, url, nil)
		if err == nil {
			conn.CloseNow()
		}
		return err == nil
	}, testTimeout, 5*time.Millisecond)
}
