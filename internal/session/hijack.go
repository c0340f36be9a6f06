package session

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
)

// Buffer sizes of a session's connection. net/http hands a hijacked
// connection over with 4 KiB buffers each way, which coder/websocket keeps
// for the connection's life: most of what an idle session costs. Audio
// frames (about 700 bytes at 16 kHz) and events fit in 1 KiB; a larger
// outbound message costs one more write.
const (
	readBufferSize  = 1 << 10
	writeBufferSize = 1 << 10
)

// smallBuffers wraps a ResponseWriter so that its Hijack hands the
// connection over with smaller buffers. Bytes the client sent after its
// handshake, already buffered by net/http, are read first. The hijacked
// connection is kept in conn, for the session's write deadlines.
type smallBuffers struct {
	http.ResponseWriter
	conn net.Conn
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
	br := bufio.NewReaderSize(conn, readBufferSize)
	if n := brw.Reader.Buffered(); n > 0 {
		// The bytes must sit in the new reader's buffer, not behind it in
		// its source: coder/websocket keeps what is buffered and resets
		// the reader onto the connection, so bytes still in a wrapped
		// source would be lost and the frames after them misread (a
		// client that speaks first, as Twilio does, hit that).
		pending, _ := brw.Reader.Peek(n)
		br = bufio.NewReaderSize(io.MultiReader(bytes.NewReader(bytes.Clone(pending)), conn), max(readBufferSize, n))
		if _, err := br.Peek(n); err != nil {
			conn.Close()
			return nil, nil, err
		}
	}
	if err := brw.Writer.Flush(); err != nil {
		conn.Close()
		return nil, nil, err
	}
	return conn, bufio.NewReadWriter(br, bufio.NewWriterSize(conn, writeBufferSize)), nil
}
