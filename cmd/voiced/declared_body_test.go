package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDeclaredBodyNotAwaited: a plain request that declares a body
// (Content-Length, or chunked) and never sends it is not held for ever.
// None of these endpoints reads a body, so net/http, before writing the
// answer, reads what is left of it (up to 256 KiB) to keep the
// connection, with no deadline: ReadHeaderTimeout ends with the header
// and IdleTimeout starts after the answer. Anyone who can reach the port,
// without a token or a session slot, held a goroutine, its buffers and a
// descriptor per connection for as long as they liked, on the public
// listener (a refused upgrade, /healthz) and the admin one: exactly what
// httpTimeout is there to bound (see TestIdleKeepAliveClosed).
func TestDeclaredBodyNotAwaited(t *testing.T) {
	base, admin, stop := startVoicedAdmin(t, "-stages", "sim", "-auth-token", "secret-token-1")
	defer func() { assert.NoError(t, stop()) }()
	var wg sync.WaitGroup
	for _, c := range []struct{ u, framing string }{
		{base + "/healthz", "Content-Length: 16"},
		{base + "/v1/session", "Content-Length: 16"}, // refused: no token
		{base + "/v1/session", "Transfer-Encoding: chunked"},
		{admin + "/metrics", "Content-Length: 16"},
	} {
		wg.Go(func() {
			conn := rawGet(t, c.u, c.framing+"\r\n")
			if conn == nil {
				return
			}
			defer conn.Close()
			// Silent from here: the server must answer, or hang up,
			// within a bound.
			assert.NoError(t, conn.SetReadDeadline(time.Now().Add(idleBound)))
			_, err := bufio.NewReader(conn).ReadByte()
			if err != nil && err != io.EOF {
				t.Errorf("%s with %s and no body: neither an answer nor a close within %v: %v", c.u, c.framing, idleBound, err)
			}
		})
	}
	wg.Wait()
}

// TestLargeHeaderRefused: a header past maxHeaderBytes is answered 431,
// not read on (net/http's default would take 1 MiB per connection).
func TestLargeHeaderRefused(t *testing.T) {
	base, stop := startVoiced(t, "-stages", "sim")
	defer func() { assert.NoError(t, stop()) }()
	pu, err := url.Parse(base)
	require.NoError(t, err)
	conn, err := net.Dial("tcp", pu.Host)
	require.NoError(t, err)
	defer conn.Close()
	require.NoError(t, conn.SetDeadline(time.Now().Add(idleBound)))
	// Written from a goroutine: the server may answer and close before
	// it has read the whole header.
	go fmt.Fprintf(conn, "GET /healthz HTTP/1.1\r\nHost: %s\r\nX-Pad: %s\r\n\r\n", pu.Host, strings.Repeat("a", 2*maxHeaderBytes))
	status, err := bufio.NewReader(conn).ReadString('\n')
	require.NoError(t, err)
	require.Contains(t, status, " 431 ")
}
