package session

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"net"
	"testing"

	"github.com/stretchr/testify/require"
)

// recordingConn records each write that reaches the connection.
type recordingConn struct {
	net.Conn
	writes [][]byte
}

func (c *recordingConn) Write(p []byte) (int, error) {
	c.writes = append(c.writes, bytes.Clone(p))
	return len(p), nil
}

// frame encodes one unmasked WebSocket frame, as a server sends it.
func frame(fin bool, opcode byte, payload []byte) []byte {
	b0 := opcode
	if fin {
		b0 |= 0x80
	}
	var h []byte
	switch n := len(payload); {
	case n < 126:
		h = []byte{b0, byte(n)}
	case n <= 0xffff:
		h = binary.BigEndian.AppendUint16([]byte{b0, 126}, uint16(n))
	default:
		h = binary.BigEndian.AppendUint64([]byte{b0, 127}, uint64(n))
	}
	return append(h, payload...)
}

// TestParkedConnWrites: bytes written through coder/websocket's 16-byte
// writer reach the connection whole and in order, each message is sent
// as soon as its last frame is complete and in as many writes as through
// a 1 KiB bufio.Writer (one up to 1 KiB), and no buffer is held after.
func TestParkedConnWrites(t *testing.T) {
	payload := func(n int) []byte { return bytes.Repeat([]byte{'x'}, n) }
	cases := []struct {
		name   string
		frames [][]byte // one message: written, then flushed as coder/websocket does
		writes int      // writes that reach the connection
	}{
		{"empty", [][]byte{frame(true, 1, nil)}, 1},
		{"pong", [][]byte{frame(true, 10, payload(13))}, 1},
		{"125 bytes", [][]byte{frame(true, 1, payload(125))}, 1},
		{"126 bytes", [][]byte{frame(true, 1, payload(126))}, 1},
		{"audio frame", [][]byte{frame(true, 2, payload(700))}, 1},
		{"fills the buffer", [][]byte{frame(true, 1, payload(1020))}, 1},
		{"just over", [][]byte{frame(true, 1, payload(1022))}, 2},
		{"3 KiB", [][]byte{frame(true, 1, payload(3000))}, 2},
		{"70 KB", [][]byte{frame(true, 2, payload(70000))}, 2},
		{"fragmented", [][]byte{frame(false, 1, payload(100)), frame(true, 0, payload(200))}, 1},
		// A pong coder/websocket writes between two frames of a message
		// ends a frame with fin set: what is buffered goes with it.
		{"pong between fragments", [][]byte{frame(false, 1, payload(100)), frame(true, 10, payload(13)), frame(true, 0, payload(200))}, 2},
		{"close after a large fragment", [][]byte{frame(false, 2, payload(3000)), frame(true, 8, payload(20))}, 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rc := &recordingConn{}
			pc := &parkedConn{Conn: rc}
			bw := bufio.NewWriterSize(pc, wsBufferSize)
			var want []byte
			for range 2 { // twice: the tracker starts the next message clean
				rc.writes = nil
				for _, f := range tc.frames {
					// As coder/websocket: the header, then the payload.
					hl := headerLen(f)
					_, err := bw.Write(f[:hl])
					require.NoError(t, err)
					_, err = bw.Write(f[hl:])
					require.NoError(t, err)
					want = append(want, f...)
				}
				require.NoError(t, bw.Flush())
				require.Len(t, rc.writes, tc.writes)
				require.Nil(t, pc.out, "a buffer is held after the message was sent")
			}
			var got []byte
			for _, w := range rc.writes {
				got = append(got, w...)
			}
			require.Equal(t, want[len(want)-len(got):], got)
		})
	}
}
