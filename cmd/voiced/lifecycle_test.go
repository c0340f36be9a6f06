package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMarginCheckedAgainstEffectiveReserve: 0 means the default for both
// -reserve (100 ms) and -terminal-margin (10 ms), so the check that the
// margin is less than the reserve compares the values the server will
// run with, not the zeros.
func TestMarginCheckedAgainstEffectiveReserve(t *testing.T) {
	for _, args := range [][]string{
		{"-reserve", "0", "-terminal-margin", "150ms"}, // runs with reserve 100 ms
		{"-reserve", "5ms", "-terminal-margin", "0"},   // runs with margin 10 ms
	} {
		_, err := parseFlags(args, func(string) string { return "" }, &bytes.Buffer{})
		require.ErrorContains(t, err, "must be less than -reserve", "%v", args)
	}
	_, err := parseFlags([]string{"-reserve", "0", "-terminal-margin", "50ms"}, func(string) string { return "" }, &bytes.Buffer{})
	require.NoError(t, err)
}

// rawGet sends a GET of u, with extra header lines (each ending in
// "\r\n") if any, on a connection of its own; nil when it could not (the
// test is failed).
func rawGet(t *testing.T, u, extra string) net.Conn {
	t.Helper()
	pu, err := url.Parse(u)
	if !assert.NoError(t, err) {
		return nil
	}
	conn, err := net.Dial("tcp", pu.Host)
	if !assert.NoError(t, err) {
		return nil
	}
	if _, err := fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\n%s\r\n", pu.Path, pu.Host, extra); !assert.NoError(t, err) {
		conn.Close()
		return nil
	}
	return conn
}

// TestIdleKeepAliveClosed: a connection that made one plain HTTP request
// (a /healthz probe, a refused upgrade answered 503 or 401) and then
// stays silent is closed after a while, on the public listener and the
// admin one. Without IdleTimeout (or ReadTimeout) net/http waits for the
// next request forever: ReadHeaderTimeout only starts once its first
// bytes arrive, so anyone who can reach the port holds a goroutine, two
// buffers and a descriptor per connection for as long as they like,
// without a session slot (-max-sessions) or a token.
func TestIdleKeepAliveClosed(t *testing.T) {
	base, admin, stop := startVoicedAdmin(t, "-stages", "sim")
	defer func() { require.NoError(t, stop()) }()
	var wg sync.WaitGroup
	for _, u := range []string{base + "/healthz", base + "/v1/session", admin + "/metrics"} {
		wg.Go(func() {
			conn := rawGet(t, u, "")
			if conn == nil {
				return
			}
			defer conn.Close()
			br := bufio.NewReader(conn)
			resp, err := http.ReadResponse(br, nil)
			if !assert.NoError(t, err) {
				return
			}
			_, err = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if !assert.NoError(t, err) || !assert.False(t, resp.Close, "%s: the server keeps the connection alive", u) {
				return
			}
			// Silent from here: the server must hang up within a bound.
			assert.NoError(t, conn.SetReadDeadline(time.Now().Add(idleBound)))
			_, err = br.ReadByte()
			assert.ErrorIs(t, err, io.EOF, "%s: an idle keep-alive connection still open after %v", u, idleBound)
		})
	}
	wg.Wait()
}

// idleBound is how long TestIdleKeepAliveClosed lets an idle connection
// stay open: under testTimeout, which stops voiced.
const idleBound = httpTimeout + 4*time.Second
