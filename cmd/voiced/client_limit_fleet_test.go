package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"
)

// TestFleetClientLimitThroughHAProxy: behind deploy/haproxy/haproxy.cfg
// (option forwardfor) and -trusted-proxies set to HAProxy's address, each
// client is its own address, not HAProxy's: with
// -max-sessions-per-client 1, a second session from one address gets 429
// through HAProxy (not retried on another instance) while another address
// still gets in.
func TestFleetClientLimitThroughHAProxy(t *testing.T) {
	ctx, rd, ai := fleetEnv(t, 60*time.Second)
	p := startInstance(t, ctx, "q0", rd.URL(), ai, "-trusted-proxies", "127.0.0.1", "-max-sessions-per-client", "1")
	lb := startHAProxy(t, ctx, []*proc{p})
	// from dials lb from the loopback address src: a client of its own.
	from := func(src string) (*websocket.Conn, *http.Response, error) {
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
		hc := &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}
		dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		return websocket.Dial(dctx, "ws://"+lb+"/v1/session", &websocket.DialOptions{HTTPClient: hc})
	}
	a, _, err := from("127.0.0.2")
	require.NoError(t, err)
	defer a.CloseNow()
	_, resp, err := from("127.0.0.2")
	require.Error(t, err)
	require.NotNil(t, resp, "%v", err)
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	require.Equal(t, "5", resp.Header.Get("Retry-After"))
	body, _ := io.ReadAll(resp.Body)
	require.Contains(t, string(body), "too many sessions for this client")
	b, _, err := from("127.0.0.3")
	require.NoError(t, err, "another client's address")
	defer b.CloseNow()
	got := metricValue(t, ctx, p, `voiced_session_upgrades_total{outcome="refused_client_limit"}`)
	require.Equal(t, float64(1), got)
}
