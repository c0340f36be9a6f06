package demo_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/web/demo"
)

// TestHeaders: every file of the demo, and a missing one, is served with
// the policy and nosniff; the page names the WebSocket of its own host.
func TestHeaders(t *testing.T) {
	srv := httptest.NewServer(demo.Handler())
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	for _, tc := range []struct {
		path   string
		status int
		ctype  string
	}{
		{"/", http.StatusOK, "text/html; charset=utf-8"},
		{"/app.js", http.StatusOK, "text/javascript; charset=utf-8"},
		{"/worklet.js", http.StatusOK, "text/javascript; charset=utf-8"},
		{"/style.css", http.StatusOK, "text/css; charset=utf-8"},
		{"/nope.js", http.StatusNotFound, ""},
	} {
		t.Run(tc.path, func(t *testing.T) {
			resp, err := srv.Client().Get(srv.URL + tc.path)
			require.NoError(t, err)
			defer resp.Body.Close()
			require.Equal(t, tc.status, resp.StatusCode)
			if tc.ctype != "" {
				require.Equal(t, tc.ctype, resp.Header.Get("Content-Type"))
			}
			require.Equal(t, "nosniff", resp.Header.Get("X-Content-Type-Options"))
			csp := resp.Header.Get("Content-Security-Policy")
			require.Contains(t, csp, "default-src 'self'")
			require.Contains(t, csp, "script-src 'self';")
			require.Contains(t, csp, "connect-src 'self' ws://"+host+" wss://"+host+";")
			require.NotContains(t, csp, "unsafe-inline")
			require.NotContains(t, csp, "unsafe-eval")
		})
	}
}

// TestCSPHost: a Host header that is not a plain host[:port] is not
// written into the policy, which could otherwise be extended through it.
func TestCSPHost(t *testing.T) {
	for _, tc := range []struct {
		host, connect string
	}{
		{"127.0.0.1:8080", "connect-src 'self' ws://127.0.0.1:8080 wss://127.0.0.1:8080;"},
		{"voice.example.com", "connect-src 'self' ws://voice.example.com wss://voice.example.com;"},
		{"[::1]:8080", "connect-src 'self' ws://[::1]:8080 wss://[::1]:8080;"},
		{"", "connect-src 'self';"},
		{"evil.test; script-src *", "connect-src 'self';"},
		{"a b", "connect-src 'self';"},
		{"x:99999999", "connect-src 'self';"},
	} {
		t.Run(tc.host, func(t *testing.T) {
			require.Contains(t, demo.CSP(tc.host), tc.connect)
			require.Equal(t, 1, strings.Count(demo.CSP(tc.host), "script-src"))
		})
	}
}

// TestNoInlineScript: the page's HTML loads every script from a file and
// carries no inline handlers or styles, so the policy needs no
// 'unsafe-inline'.
func TestNoInlineScript(t *testing.T) {
	f, err := demo.FS().Open("index.html")
	require.NoError(t, err)
	defer f.Close()
	b, err := io.ReadAll(f)
	require.NoError(t, err)
	html := string(b)
	for _, m := range regexp.MustCompile(`(?is)<script\b[^>]*>(.*?)</script>`).FindAllStringSubmatch(html, -1) {
		require.Contains(t, m[0], `src="`, "inline script: %s", m[0])
		require.Empty(t, strings.TrimSpace(m[1]), "inline script: %s", m[0])
	}
	require.NotRegexp(t, `(?i)\son[a-z]+\s*=`, html, "inline event handler")
	require.NotRegexp(t, `(?i)\sstyle\s*=`, html, "inline style attribute")
	require.NotRegexp(t, `(?i)<style\b`, html, "inline style element")
	require.NotContains(t, html, "javascript:")
}
