package main

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"
)

// TestLoopbackHostOnly: a loopback listener that asks for no token (the
// public one without tokens, the admin one always) answers only requests
// naming a loopback host. A web page whose own name its DNS turns to
// 127.0.0.1 (DNS rebinding) sends that name as Host and its origin as
// Origin, which agree: without this, the page opened sessions (its LLM
// spend, the server's engines) and read /metrics and the profiler as
// same-origin.
func TestLoopbackHostOnly(t *testing.T) {
	base, admin, stop := startVoicedAdmin(t, "-stages", "sim")
	defer func() { require.NoError(t, stop()) }()
	for _, tt := range []struct {
		url, host string
		want      int
	}{
		{base + "/healthz", "", http.StatusOK},
		{base + "/healthz", "localhost:8080", http.StatusOK},
		{base + "/healthz", "LOCALHOST", http.StatusOK},
		{base + "/healthz", "127.0.0.2:80", http.StatusOK},
		{base + "/healthz", "[::1]:8080", http.StatusOK},
		{base + "/healthz", "[::1]", http.StatusOK},
		{base + "/metrics", "evil.example:8080", http.StatusForbidden},
		{base + "/", "evil.example", http.StatusForbidden},
		{base + "/healthz", "localhost.evil.example", http.StatusForbidden},
		{base + "/healthz", "127.0.0.1.nip.io", http.StatusForbidden},
		{base + "/healthz", "10.0.0.1:8080", http.StatusForbidden},
		{admin + "/metrics", "evil.example:8081", http.StatusForbidden},
		{admin + "/debug/pprof/", "evil.example:8081", http.StatusForbidden},
		{admin + "/metrics", "localhost:8081", http.StatusOK},
	} {
		req, err := http.NewRequest(http.MethodGet, tt.url, nil)
		require.NoError(t, err)
		if tt.host != "" {
			req.Host = tt.host
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		require.Equal(t, tt.want, resp.StatusCode, "%s with Host %q", tt.url, tt.host)
	}

	// The session, where the origin check alone let the page in.
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	h := http.Header{"Origin": {"http://evil.example:8080"}}
	h.Set("Host", "evil.example:8080")
	_, resp, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(base, "http")+"/v1/session", &websocket.DialOptions{
		HTTPHeader: h, Host: "evil.example:8080",
	})
	require.Error(t, err)
	require.NotNil(t, resp)
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
}

// TestLoopbackWithTokens: a loopback listener given tokens is one a proxy
// or a tunnel reaches (docs/protocol.md, "Pointing a Twilio number at
// voiced through a tunnel"): it serves any Host, as a public listener
// does, since the tokens guard it, and it keeps /metrics, which needs
// none, to the admin listener.
func TestLoopbackWithTokens(t *testing.T) {
	base, admin, stop := startVoicedAdmin(t, "-stages", "sim", "-auth-token", "tok-1")
	defer func() { require.NoError(t, stop()) }()
	req, err := http.NewRequest(http.MethodGet, base+"/healthz", nil)
	require.NoError(t, err)
	req.Host = "abcd.trycloudflare.com"
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "a tunnel's Host")

	code, _ := get(t, base+"/metrics")
	require.Equal(t, http.StatusNotFound, code, "no /metrics without a token where a tunnel may reach it")
	code, _ = get(t, admin+"/metrics")
	require.Equal(t, http.StatusOK, code)
}

// TestLoopbackHost: which Host headers name loopback.
func TestLoopbackHost(t *testing.T) {
	for host, want := range map[string]bool{
		"":                  true, // HTTP/1.0: no browser's
		"localhost":         true,
		"localhost.":        true,
		"Localhost:1":       true,
		"127.0.0.1":         true,
		"127.255.0.9:8080":  true,
		"[::1]:8080":        true,
		"[::ffff:7f00:1]":   true,
		"::1":               true,
		"sub.localhost":     false,
		"evil.example":      false,
		"0.0.0.0:8080":      false,
		"192.168.1.2":       false,
		"localhost@evil":    false,
		"[::1]x":            false,
		"127.0.0.1.nip.io":  false,
		"2130706433:8080":   false, // 127.0.0.1 as one number: a name to net/http, resolved by DNS
		"localhost:8080:80": false,
	} {
		require.Equal(t, want, loopbackHost(host), "%q", host)
	}
}
