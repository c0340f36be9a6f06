package session

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"testing/synctest"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"
)

// pipeHijacker is a ResponseWriter whose Hijack hands over one end of a
// pipe, for a session whose connection runs on the test's clock.
type pipeHijacker struct {
	header http.Header
	conn   net.Conn
}

func (w *pipeHijacker) Header() http.Header         { return w.header }
func (w *pipeHijacker) Write(b []byte) (int, error) { return len(b), nil }
func (w *pipeHijacker) WriteHeader(int)             {}
func (w *pipeHijacker) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return w.conn, bufio.NewReadWriter(bufio.NewReader(w.conn), bufio.NewWriter(w.conn)), nil
}

// TestCloseFrameHasItsOwnWriteDeadline: the writer's close frame is a
// write of its own, bounded by a write timeout of its own, not by what is
// left of the last message's. A client that reads slowly but steadily
// took a message in most of -write-timeout, and the close right after it
// (a drain's 1012, a slow client's 1008, an idle close's 1001) found that
// deadline passed while the frame waited for room: it failed, and the
// client saw the connection end without the close code protocol.md
// documents.
func TestCloseFrameHasItsOwnWriteDeadline(t *testing.T) {
	cases := []struct {
		name  string
		close func(s *Session)
		code  websocket.StatusCode
	}{
		{"queued close", func(s *Session) { s.queueClose(websocket.StatusServiceRestart, "server restarting") }, websocket.StatusServiceRestart},
		{"kick", func(s *Session) {
			s.mu.Lock()
			s.closing = true
			s.kickLocked(closeStatus{websocket.StatusPolicyViolation, errSlowClient.Error()})
			s.startWriterLocked()
			s.mu.Unlock()
		}, websocket.StatusPolicyViolation},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const writeTimeout = 5 * time.Second
				log := slog.New(slog.DiscardHandler)
				srv := NewServer(Config{WriteTimeout: writeTimeout}, drainRunner{}, log, nil)
				defer srv.Close()
				s := newSession(srv, "s1", log)
				serverEnd, clientEnd := net.Pipe()
				defer clientEnd.Close()
				r := httptest.NewRequest(http.MethodGet, "/", nil)
				r.Header.Set("Connection", "Upgrade")
				r.Header.Set("Upgrade", "websocket")
				r.Header.Set("Sec-WebSocket-Version", "13")
				r.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
				hj := &smallBuffers{ResponseWriter: &pipeHijacker{header: http.Header{}, conn: serverEnd}}
				conn, err := websocket.Accept(hj, r, &websocket.AcceptOptions{CompressionMode: websocket.CompressionDisabled})
				require.NoError(t, err)
				defer conn.CloseNow()
				s.raw, s.pc, s.br = hj.conn, hj.pc, hj.br

				// The client reads 100 bytes every 120 ms: the 4,004-byte
				// message, in 41 reads, takes 4.92 s of the 5 s.
				got := make(chan []byte, 1)
				go func() {
					var all []byte
					buf := make([]byte, 100)
					for {
						time.Sleep(120 * time.Millisecond)
						n, err := clientEnd.Read(buf)
						all = append(all, buf[:n]...)
						if _, ok := closeFrame(all); ok || err != nil {
							clientEnd.Close() // the peer's end of the handshake
							got <- all
							return
						}
					}
				}()
				s.mu.Lock()
				s.pushLocked(outbound{data: bytes.Repeat([]byte{'x'}, 4000)})
				s.mu.Unlock()
				s.ready(context.Background(), conn) // the writer starts
				time.Sleep(time.Second)             // the message is on its way
				tc.close(s)
				all := <-got
				s.writers.Wait()
				payload, ok := closeFrame(all)
				require.True(t, ok, "the client got no close frame, %d bytes", len(all))
				require.Equal(t, tc.code, websocket.StatusCode(binary.BigEndian.Uint16(payload)))
			})
		})
	}
}

// closeFrame returns the payload of the first close frame among the
// whole frames at the start of b, as a server sends them (unmasked).
func closeFrame(b []byte) ([]byte, bool) {
	for len(b) >= 2 {
		n, h := uint64(b[1]&0x7f), 2
		switch n {
		case 126:
			if len(b) < 4 {
				return nil, false
			}
			n, h = uint64(binary.BigEndian.Uint16(b[2:4])), 4
		case 127:
			if len(b) < 10 {
				return nil, false
			}
			n, h = binary.BigEndian.Uint64(b[2:10]), 10
		}
		if uint64(len(b)-h) < n {
			return nil, false
		}
		if b[0]&0x0f == 8 {
			return b[h : h+int(n)], true
		}
		b = b[h+int(n):]
	}
	return nil, false
}
