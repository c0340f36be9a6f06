package session_test

import (
	"net"
	"net/http"
	"strings"
	"syscall"

	"github.com/coder/websocket"
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
