package session_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/pipeline"
	"github.com/voiced/voiced/internal/protocol"
	"github.com/voiced/voiced/internal/session"
)

// rawDial opens a WebSocket at u with coder/websocket and also returns the
// TCP connection beneath it, so that a test can see what the server sends
// without its client answering anything (coder/websocket answers a close
// frame as soon as it reads one).
func rawDial(t *testing.T, ctx context.Context, u string) (*websocket.Conn, net.Conn) {
	t.Helper()
	raws := make(chan net.Conn, 1)
	var d net.Dialer
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		if err == nil {
			raws <- c
		}
		return c, err
	}}}
	conn, _, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPClient: hc})
	require.NoError(t, err)
	t.Cleanup(func() { conn.CloseNow() })
	return conn, <-raws
}

// awaitCloseFrame reads raw from the connection until the server's close
// frame begins (the server sends nothing else first in these tests); the
// close is not answered.
func awaitCloseFrame(t *testing.T, raw net.Conn) {
	t.Helper()
	require.NoError(t, raw.SetReadDeadline(time.Now().Add(testTimeout)))
	b := make([]byte, 1)
	_, err := io.ReadFull(raw, b)
	require.NoError(t, err)
	require.Equal(t, byte(0x88), b[0], "a close frame (FIN, opcode 8)")
}

// TestForcedCloseCutsSessionInTeardown: a forced close (Server.Close)
// cuts the connection of a session whose reader has already returned and
// whose writer waits, in the close handshake, for a peer that does not
// answer. serve undid the shutdown's watch of the connection (unwatch)
// before teardown, so nothing cut it: coder/websocket waited its 5 s for
// the close frame, and Close reported ErrStuck (a stage that ignores
// cancellation, which none did) and the process exited without closing
// its engines. Here the reader ends on a message over -max-message-bytes
// (the library sends 1009 itself, and the session's own close then waits
// for the answer).
func TestForcedCloseCutsSessionInTeardown(t *testing.T) {
	h := newHarness(t, &fakeStages{}, pipeline.Config{}, session.Config{MaxMessageBytes: 1024})
	conn, raw := rawDial(t, h.ctx, "ws"+strings.TrimPrefix(h.http.URL, "http"))
	_, b, err := conn.Read(h.ctx)
	require.NoError(t, err)
	m, err := protocol.DecodeServer(b)
	require.NoError(t, err)
	require.Equal(t, protocol.TypeSessionReady, m.Type)

	require.NoError(t, conn.Write(h.ctx, websocket.MessageText, make([]byte, 4096)))
	awaitCloseFrame(t, raw) // the reader has failed; from here the client answers nothing
	start := time.Now()
	require.NoError(t, h.srv.Close())
	require.Less(t, time.Since(start), 2500*time.Millisecond, "cut after the close grace (2 s)")
}

// TestForcedCloseCutsEndedCall: the same for a phone call that Twilio
// stopped: readCall returned on stop, undoing its watch, and the
// writer's close handshake then waited 5 s for a peer that had gone
// quiet, past a forced close's grace.
func TestForcedCloseCutsEndedCall(t *testing.T) {
	h := newHarness(t, &fakeStages{}, pipeline.Config{}, session.Config{})
	hs := httptest.NewServer(http.HandlerFunc(h.srv.ServeTwilio))
	t.Cleanup(hs.Close)
	conn, raw := rawDial(t, h.ctx, "ws"+strings.TrimPrefix(hs.URL, "http")+"/v1/twilio")
	const sid = "MZ0123456789abcdef"
	for _, msg := range []string{
		`{"event":"connected","protocol":"Call","version":"1.0.0"}`,
		`{"event":"start","sequenceNumber":"1","streamSid":"` + sid + `","start":{"accountSid":"AC0123","streamSid":"` + sid +
			`","callSid":"CA0123","tracks":["inbound"],"customParameters":{},"mediaFormat":{"encoding":"audio/x-mulaw","sampleRate":8000,"channels":1}}}`,
		`{"event":"stop","sequenceNumber":"2","streamSid":"` + sid + `","stop":{"accountSid":"AC0123","callSid":"CA0123"}}`,
	} {
		require.NoError(t, conn.Write(h.ctx, websocket.MessageText, []byte(msg)))
	}
	awaitCloseFrame(t, raw) // the call's close (1000) after stop
	start := time.Now()
	require.NoError(t, h.srv.Close())
	require.Less(t, time.Since(start), 2500*time.Millisecond, "cut after the close grace (2 s)")
}
