package sse

import (
	"errors"
	"io"
	"testing"
)

// endlessData is a stream that never ends its event: data lines, each
// well under MaxLine, with no blank line between them, as a broken
// upstream (or a proxy that strips blank lines) might send them.
type endlessData struct{ read, limit int }

var dataLine = []byte("data: " + string(make([]byte, 4090)) + "\n")

func (e *endlessData) Read(p []byte) (int, error) {
	if e.read >= e.limit {
		return 0, io.EOF
	}
	n := 0
	for n+len(dataLine) <= len(p) && e.read < e.limit {
		n += copy(p[n:], dataLine)
		e.read += len(dataLine)
	}
	if n == 0 {
		n = copy(p, dataLine[:len(p)])
		e.read += n
	}
	return n, nil
}

// TestEventDataBounded: the package promises that a broken upstream
// cannot make voiced buffer without bound, but only each line is capped;
// an event's data lines are joined without limit. One event must not
// hold more than MaxLine bytes of data either.
func TestEventDataBounded(t *testing.T) {
	src := &endlessData{limit: 64 << 20}
	_, err := NewReader(src).Next()
	if !errors.Is(err, ErrLineTooLong) {
		t.Fatalf("err = %v, want ErrLineTooLong", err)
	}
	if src.read > 2*MaxLine {
		t.Fatalf("read %d bytes into one event before giving up (MaxLine %d)", src.read, MaxLine)
	}
}
