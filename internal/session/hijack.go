package session

import (
	"bufio"
	"encoding/binary"
	"net"
	"net/http"
	"sync"
)

// Buffer sizes of a session's connection. net/http hands a hijacked
// connection over with 4 KiB buffers each way, which coder/websocket keeps
// for the connection's life: most of what an idle session costs. Audio
// frames (about 700 bytes at 16 kHz) and events fit in 1 KiB; a larger
// outbound message costs one more write.
//
// Both go through 1 KiB buffers taken from a pool only while they hold
// bytes (see parkedConn), so that an idle session holds none;
// coder/websocket's own reader and writer on top keep only the smallest
// buffers bufio allows.
const (
	readBufferSize  = 1 << 10
	writeBufferSize = 1 << 10
	// wsBufferSize is coder/websocket's reader's and writer's own
	// buffers: bufio's smallest, enough for a frame header.
	wsBufferSize = 16
)

// smallBuffers wraps a ResponseWriter so that its Hijack hands the
// connection over wrapped (see parkedConn), with smaller buffers. The
// hijacked connection is kept in conn, for the session's write deadlines,
// with the wrapper and the reader coder/websocket reads through.
type smallBuffers struct {
	http.ResponseWriter
	parker *parker
	conn   net.Conn
	pc     *parkedConn
	br     *bufio.Reader
}

var _ http.Hijacker = (*smallBuffers)(nil)

// Unwrap lets http.ResponseController and coder/websocket reach the
// underlying writer's other interfaces.
func (w *smallBuffers) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *smallBuffers) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, brw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	w.conn = conn
	w.pc = &parkedConn{Conn: conn, p: w.parker}
	if n := brw.Reader.Buffered(); n > 0 {
		// Bytes the client sent right after its handshake (Twilio speaks
		// first), already buffered by net/http: the wrapper returns them
		// before reading the connection. They must not be left in a
		// reader coder/websocket wraps: it resets its reader onto the
		// connection it is given, which is the wrapper.
		pending, _ := brw.Reader.Peek(n)
		w.pc.take(pending)
	}
	if err := brw.Writer.Flush(); err != nil {
		conn.Close()
		return nil, nil, err
	}
	w.br = bufio.NewReaderSize(w.pc, wsBufferSize)
	return w.pc, bufio.NewReadWriter(w.br, bufio.NewWriterSize(w.pc, wsBufferSize)), nil
}

// parkedConn is a session's connection as coder/websocket holds it: the
// hijacked connection, with read and write buffers held only while they
// hold bytes, and what parking an idle session needs (see parker). Every close of the
// connection, coder/websocket's included, goes through Close, which wakes
// a parked session first, so that its reader sees the end and tears the
// session down.
type parkedConn struct {
	net.Conn
	p     *parker
	ready func() // goes on reading: starts the session's reader goroutine

	// in[r:w] are bytes read and not yet taken; in is nil when there are
	// none. Owned by the reader (coder/websocket reads under its read
	// lock).
	in   *[]byte
	r, w int

	// out holds bytes written and not yet sent (nil: none), and frame
	// follows the frames written, to send them when a message's last
	// frame is complete. Owned by the writer (coder/websocket writes
	// under its frame lock).
	out   *[]byte
	frame frameTracker

	mu         sync.Mutex
	fd         uintptr // the connection's descriptor, once registered; guarded by mu
	parked     bool    // waits in p for the connection to be readable; guarded by mu
	registered bool    // known to p's poller (re-armed rather than added), and in p.conns; guarded by mu
	closed     bool    // Close has begun: it must not park again; guarded by mu
}

// isRegistered reports whether c was armed with the poller before.
func (c *parkedConn) isRegistered() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.registered
}

var _ net.Conn = (*parkedConn)(nil)

// readBuffers are the connections' read buffers, each held while it has
// bytes not yet taken.
var readBuffers = sync.Pool{New: func() any { b := make([]byte, readBufferSize); return &b }}

// writeBuffers are the connections' write buffers, each held while it has
// bytes not yet sent.
var writeBuffers = sync.Pool{New: func() any { b := make([]byte, 0, writeBufferSize); return &b }}

// Read returns buffered bytes, else reads the connection: into p directly
// when p is as large as a buffer, else into a pooled buffer, so that a
// small read (a frame header) does not cost a system call of its own.
func (c *parkedConn) Read(p []byte) (int, error) {
	if c.in == nil {
		if len(p) >= readBufferSize {
			return c.Conn.Read(p)
		}
		c.in = readBuffers.Get().(*[]byte)
		n, err := c.Conn.Read(*c.in)
		if n == 0 {
			c.release()
			return 0, err
		}
		c.r, c.w = 0, n
	}
	n := copy(p, (*c.in)[c.r:c.w])
	c.r += n
	if c.r == c.w {
		c.release()
	}
	return n, nil
}

// take puts b before what is read from the connection.
func (c *parkedConn) take(b []byte) {
	buf := readBuffers.Get().(*[]byte)
	if len(b) > len(*buf) {
		readBuffers.Put(buf)
		buf = new([]byte)
		*buf = make([]byte, len(b))
	}
	c.in, c.r, c.w = buf, 0, copy(*buf, b)
}

func (c *parkedConn) release() {
	if len(*c.in) == readBufferSize {
		readBuffers.Put(c.in)
	}
	c.in = nil
}

// buffered reports whether bytes read are waiting; for the reader only.
func (c *parkedConn) buffered() bool { return c.in != nil }

// Write buffers what it is given and sends it once a message's last frame
// is complete, or the buffer is full, as the 1 KiB bufio.Writer
// coder/websocket would otherwise keep did: coder/websocket flushes its
// writer only at the end of a message, which a writer below its 16 bytes
// cannot see, so it follows the frames itself. Bytes as large as a buffer
// are sent from p directly when nothing is buffered.
func (c *parkedConn) Write(p []byte) (int, error) {
	written := 0
	for len(p) > 0 {
		if c.out == nil && len(p) >= writeBufferSize {
			n, _ := c.frame.advance(p)
			m, err := c.Conn.Write(p[:n])
			written += m
			if err != nil {
				return written, err
			}
			p = p[n:]
			continue
		}
		if c.out == nil {
			c.out = writeBuffers.Get().(*[]byte)
		}
		room := writeBufferSize - len(*c.out)
		n, end := c.frame.advance(p[:min(len(p), room)])
		*c.out = append(*c.out, p[:n]...)
		written += n
		p = p[n:]
		if end || len(*c.out) == writeBufferSize {
			if err := c.flush(); err != nil {
				return written, err
			}
		}
	}
	return written, nil
}

// flush sends the buffered bytes and releases the buffer.
func (c *parkedConn) flush() error {
	_, err := c.Conn.Write(*c.out)
	*c.out = (*c.out)[:0]
	writeBuffers.Put(c.out)
	c.out = nil
	return err
}

// frameTracker follows the WebSocket frames in a byte stream (RFC 6455
// section 5.2) to tell where a message's last frame ends.
type frameTracker struct {
	head [14]byte // the frame header so far
	n    int      // bytes of head received
	left uint64   // payload bytes of the current frame still to come
	fin  bool     // the current frame is its message's last
}

// advance consumes p up to the end of the current frame at most; it
// returns how many bytes it consumed and whether they end a message's
// last frame.
func (t *frameTracker) advance(p []byte) (int, bool) {
	used := 0
	for t.n < headerLen(t.head[:t.n]) {
		if used == len(p) {
			return used, false
		}
		t.head[t.n] = p[used]
		t.n++
		used++
		if t.n == headerLen(t.head[:t.n]) {
			t.fin = t.head[0]&0x80 != 0
			switch l := t.head[1] & 0x7f; l {
			case 126:
				t.left = uint64(binary.BigEndian.Uint16(t.head[2:4]))
			case 127:
				t.left = binary.BigEndian.Uint64(t.head[2:10])
			default:
				t.left = uint64(l)
			}
		}
	}
	n := uint64(len(p) - used)
	if n < t.left {
		t.left -= n
		return len(p), false
	}
	used += int(t.left)
	t.left, t.n = 0, 0
	return used, t.fin
}

// headerLen is the length of the frame header that starts with h: 2 bytes
// until the second byte tells the rest.
func headerLen(h []byte) int {
	if len(h) < 2 {
		return 2
	}
	n := 2
	switch h[1] & 0x7f {
	case 126:
		n += 2
	case 127:
		n += 8
	}
	if h[1]&0x80 != 0 {
		n += 4 // masking key
	}
	return n
}

// Close wakes the session if it is parked, then closes the connection.
func (c *parkedConn) Close() error {
	c.p.closing(c)
	return c.Conn.Close()
}
