package session

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/cancel"
	"github.com/voiced/voiced/internal/protocol"
)

// TestRequestAfterDrainClose: a request whose first frame the session
// reads after it has queued its 1012 close still ends with exactly one
// terminal message, unavailable. While the close is still queued the
// refusal goes out before it; once the close frame is out, the refusal is
// kept and replayed, once, to the session that resumes the conversation.
//
// The test plays the session's reader itself (handleAudio), so the frame
// is read exactly when it means to: after the close is queued, and, in
// the second case, after the client has received the close frame.
func TestRequestAfterDrainClose(t *testing.T) {
	t.Run("close still queued", func(t *testing.T) {
		ctx, srv, pair, s := lateSession(t)
		// No connection yet, so no writer: the close stays queued.
		queueDrainClose(s)
		lateFrame(ctx, t, s, "r1")

		client := pair.connect(ctx, t, s)
		typ, b, err := client.Read(ctx)
		require.NoError(t, err, "the refusal comes before the close")
		require.Equal(t, websocket.MessageText, typ)
		requireUnavailable(t, b, "r1")
		_, _, err = client.Read(ctx)
		require.Equal(t, websocket.StatusServiceRestart, websocket.CloseStatus(err))
		s.writers.Wait()

		missed, err := srv.cfg.Conversations.TakeMissed(ctx, s.conv)
		require.NoError(t, err)
		require.Empty(t, missed, "sent, so not kept as well")
	})

	t.Run("close already written", func(t *testing.T) {
		ctx, srv, pair, s := lateSession(t)
		client := pair.connect(ctx, t, s)
		queueDrainClose(s)
		_, _, err := client.Read(ctx)
		require.Equal(t, websocket.StatusServiceRestart, websocket.CloseStatus(err), "the close frame is out")
		s.writers.Wait()

		lateFrame(ctx, t, s, "r1")
		// What teardown does once the reader has seen the connection end.
		s.flushMissed()

		resume := pair.url(srv.issueToken(s.conv, s.tenants.id))
		c2, _, err := websocket.Dial(ctx, resume, nil)
		require.NoError(t, err)
		defer c2.CloseNow()
		require.Equal(t, protocol.TypeSessionReady, readType(t, readMsg(ctx, t, c2)))
		replayed := untilPong(ctx, t, c2)
		require.Len(t, replayed, 1, "the refusal is replayed, once")
		requireUnavailable(t, replayed[0], "r1")
		c2.Close(websocket.StatusNormalClosure, "")

		c3, _, err := websocket.Dial(ctx, resume, nil)
		require.NoError(t, err)
		defer c3.CloseNow()
		require.Equal(t, protocol.TypeSessionReady, readType(t, readMsg(ctx, t, c3)))
		require.Empty(t, untilPong(ctx, t, c3), "not replayed a second time")
		c3.Close(websocket.StatusNormalClosure, "")
	})
}

// queueDrainClose makes s a draining session whose linger is over and
// queues its 1012 close, the way the drain's timer does.
func queueDrainClose(s *Session) {
	s.mu.Lock()
	s.draining = true
	s.mu.Unlock()
	s.closeIfDrained()
}

// lateFrame has s read the first (and final) frame of request id, which
// it refuses.
func lateFrame(ctx context.Context, t *testing.T, s *Session, id string) {
	t.Helper()
	finalFrame(ctx, t, s, id)
	require.Zero(t, s.reqs.Len(), "the request is refused, not accepted")
}

// finalFrame has s read a first frame of request id that is also its
// final one, due 5 s from now.
func finalFrame(ctx context.Context, t *testing.T, s *Session, id string) {
	t.Helper()
	b, err := protocol.EncodeBinaryAudio(nil, protocol.AudioHeader{
		RequestID: id, DeadlineAt: protocol.Millis(time.Now().Add(5 * time.Second)), Final: true,
	}, make([]int16, 320))
	require.NoError(t, err)
	a, err := protocol.DecodeBinaryAudio(b)
	require.NoError(t, err)
	s.handleAudio(ctx, &a, time.Now())
}

// endRequestsAtCleanup ends s's requests still in flight when the test
// is over, and waits for their goroutines.
func endRequestsAtCleanup(t *testing.T, s *Session) {
	t.Cleanup(func() {
		for _, h := range s.reqs.Handles() {
			h.Cancel(cancel.Shutdown)
		}
		s.wg.Wait()
	})
}

func requireUnavailable(t *testing.T, b []byte, id string) {
	t.Helper()
	m, err := protocol.DecodeServer(b)
	require.NoError(t, err)
	require.Equal(t, protocol.TypeError, m.Type, "message: %s", b)
	var e protocol.ErrorMessage
	require.NoError(t, m.As(&e))
	require.Equal(t, id, e.RequestID)
	require.Equal(t, protocol.CodeUnavailable, e.Code)
}

func readMsg(ctx context.Context, t *testing.T, c *websocket.Conn) []byte {
	t.Helper()
	_, b, err := c.Read(ctx)
	require.NoError(t, err)
	return b
}

func readType(t *testing.T, b []byte) string {
	t.Helper()
	m, err := protocol.DecodeServer(b)
	require.NoError(t, err)
	return m.Type
}

// untilPong pings and returns the messages that come before the pong:
// what the session had queued before it read the ping.
func untilPong(ctx context.Context, t *testing.T, c *websocket.Conn) [][]byte {
	t.Helper()
	require.NoError(t, c.Write(ctx, websocket.MessageText, []byte(`{"type":"ping","clientTime":1}`)))
	var before [][]byte
	for {
		b := readMsg(ctx, t, c)
		if readType(t, b) == protocol.TypePong {
			return before
		}
		before = append(before, b)
	}
}

// lateSession returns a session without a connection yet (the test
// plays its reader), of a server with the default in-memory conversation
// store, served over loopback, and a way to give the session a real
// connection; ctx bounds the test.
func lateSession(t *testing.T) (context.Context, *Server, *connPair, *Session) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	srv := NewServer(Config{}, drainRunner{}, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	p := &connPair{accepted: make(chan *accepted, 1)}
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/manual" {
			hj := &smallBuffers{ResponseWriter: w}
			conn, err := websocket.Accept(hj, r, nil)
			if err == nil {
				p.accepted <- &accepted{conn: conn, raw: hj.conn}
			}
			return
		}
		srv.ServeHTTP(w, r)
	}))
	p.base = "ws" + strings.TrimPrefix(hs.URL, "http")
	t.Cleanup(func() {
		require.NoError(t, srv.Close())
		hs.Close()
	})
	s := newSession(srv, "late", srv.log)
	s.conv = "conv-late"
	return ctx, srv, p, s
}

type accepted struct {
	conn *websocket.Conn
	raw  net.Conn
}

// connPair hands the server side of a loopback WebSocket to a session
// the test made.
type connPair struct {
	base     string
	accepted chan *accepted
}

func (p *connPair) url(resumeToken string) string {
	return p.base + "/?resume=" + url.QueryEscape(resumeToken)
}

// connect gives s a real connection, as welcome does, and returns the
// client's end.
func (p *connPair) connect(ctx context.Context, t *testing.T, s *Session) *websocket.Conn {
	t.Helper()
	client, _, err := websocket.Dial(ctx, p.base+"/manual", nil)
	require.NoError(t, err)
	t.Cleanup(func() { client.CloseNow() })
	var a *accepted
	select {
	case a = <-p.accepted:
	case <-ctx.Done():
		t.Fatal("no connection accepted")
	}
	t.Cleanup(func() { a.conn.CloseNow() })
	s.raw = a.raw
	s.ready(ctx, a.conn)
	return client
}
