package session_test

import (
	"context"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/pipeline"
	"github.com/voiced/voiced/internal/session"
)

// smallWindow is the receive buffer of a client that stops reading. With
// the kernel's autotuning, loopback receive buffers grow to tens of MiB
// (net.ipv4.tcp_rmem): a test would push that much through the server's
// decoder before its writer blocks, seconds of CPU under -race on a busy
// machine. A buffer set before connecting is not autotuned.
const smallWindow = 16 << 10

// dialSmallWindow is dial with the client's receive buffer fixed at
// smallWindow, for tests of clients that stop reading.
func (h *harness) dialSmallWindow() *client {
	h.t.Helper()
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) {
			serr = setRcvbuf(fd, smallWindow)
		})
		if err != nil {
			return err
		}
		return serr
	}}
	hc := &http.Client{Transport: &http.Transport{
		DialContext: d.DialContext,
	}}
	h.t.Cleanup(hc.CloseIdleConnections)
	return h.dialWith("ws"+strings.TrimPrefix(h.http.URL, "http"), &websocket.DialOptions{HTTPClient: hc})
}

// newSlowClientHarness is newHarness on smallSendListener, for tests of
// clients that stop reading.
func newSlowClientHarness(t testing.TB, fake *fakeStages, pcfg pipeline.Config, scfg session.Config) *harness {
	t.Helper()
	return newHarnessOn(t, smallSendListener(t), fake, pcfg, scfg)
}

// smallSendListener listens on a loopback port whose connections' send
// buffers are fixed at smallWindow (a listening socket's buffer sizes pass
// to the connections it accepts). With autotuning, a server's send buffer
// takes megabytes on loopback: tens of thousands of pongs a test of a
// client that stops reading had to provoke, which under -race on a loaded
// machine overran the test's time.
func smallSendListener(t testing.TB) net.Listener {
	t.Helper()
	lc := net.ListenConfig{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		if err := rc.Control(func(fd uintptr) { serr = setSndbuf(fd, smallWindow) }); err != nil {
			return err
		}
		return serr
	}}
	ln, err := lc.Listen(context.Background(), "tcp", "127.0.0.1:0")
	require.NoError(t, err)
	return ln
}
