package session

import (
	"bufio"
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
// Reads go through a 1 KiB buffer taken from a pool while bytes are
// waiting in it (see parkedConn.Read), so that an idle session holds
// none; coder/websocket's own reader on top keeps only the smallest
// buffer bufio allows. The write buffer stays for the session's life:
// coder/websocket writes its pongs and close frames through it too, and
// flushes it at the end of each message, which a writer below it cannot
// tell from a full buffer.
const (
	readBufferSize  = 1 << 10
	writeBufferSize = 1 << 10
	// wsReaderSize is coder/websocket's reader's own buffer: bufio's
	// smallest, enough for a frame header in one fill.
	wsReaderSize = 16
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
	w.br = bufio.NewReaderSize(w.pc, wsReaderSize)
	return w.pc, bufio.NewReadWriter(w.br, bufio.NewWriterSize(w.pc, writeBufferSize)), nil
}

// parkedConn is a session's connection as coder/websocket holds it: the
// hijacked connection, with a read buffer held only while it holds bytes,
// and what parking an idle session needs (see parker). Every close of the
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

	// Guarded by p.mu.
	fd         uintptr // the connection's descriptor, once registered
	parked     bool    // waits in p for the connection to be readable
	registered bool    // known to p's poller (re-armed rather than added)
	closed     bool    // Close has begun: it must not park again
}

var _ net.Conn = (*parkedConn)(nil)

// readBuffers are the connections' read buffers, each held while it has
// bytes not yet taken.
var readBuffers = sync.Pool{New: func() any { b := make([]byte, readBufferSize); return &b }}

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

// Close wakes the session if it is parked, then closes the connection.
func (c *parkedConn) Close() error {
	c.p.closing(c)
	return c.Conn.Close()
}
