// Package sse reads Server-Sent Events as the LLM providers send them.
//
// It is deliberately small: events are runs of "field: value" lines ended
// by a blank line; "data" lines (with or without a space after the colon)
// are joined with "\n"; "event" names the event; comment lines (":...")
// and other fields (id, retry) are ignored (a bare JSON line, on request:
// Reader.Bare). Lines may end in LF or CRLF
// (Gemini frames with CRLF). A line longer than MaxLine, or an event whose
// joined data is, is an error, so a broken upstream cannot make voiced
// buffer without bound.
package sse

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
)

// MaxLine is the longest line accepted, in bytes, and the most data one
// event may carry (its data lines joined).
const MaxLine = 1 << 20

// ErrLineTooLong is returned for a line longer than MaxLine, and for an
// event whose data is.
var ErrLineTooLong = errors.New("sse: line too long")

// Event is one server-sent event.
type Event struct {
	Name string // the "event" field, "" when absent
	Data string // the "data" lines joined with "\n"
	// Bare: Data is one line that began with '{', not an SSE field (see
	// Reader.Bare).
	Bare bool
}

// Reader reads events from a stream. It is not safe for concurrent use.
type Reader struct {
	sc *bufio.Scanner
	// Bare makes Next return a line that begins with '{' as an event of
	// its own (Event.Bare): Gemini may send an error object mid-stream
	// without the "data:" prefix, which SSE would ignore as an unknown
	// field. An event it interrupts is dropped.
	Bare bool
}

// NewReader returns a Reader on r.
func NewReader(r io.Reader) *Reader {
	sc := bufio.NewScanner(r)
	// The scanner's limit counts the line's end too: room for CRLF, so
	// that a line of exactly MaxLine bytes is accepted (Next checks).
	sc.Buffer(make([]byte, 0, 16<<10), MaxLine+len("\r\n"))
	// bufio.ScanLines drops a trailing \r, which handles CRLF framing.
	sc.Split(bufio.ScanLines)
	return &Reader{sc: sc}
}

// Next returns the next event that has a data field. At the clean end of
// the stream it returns io.EOF; a stream that ends in the middle of an
// event returns io.ErrUnexpectedEOF, so a cut connection is never taken
// for a complete event.
func (r *Reader) Next() (Event, error) {
	var (
		ev      Event
		data    bytes.Buffer
		hasData bool
		started bool
	)
	for r.sc.Scan() {
		line := r.sc.Bytes()
		if len(line) > MaxLine {
			return Event{}, ErrLineTooLong
		}
		if len(line) == 0 {
			if hasData {
				ev.Data = data.String()
				return ev, nil
			}
			ev, started = Event{}, false
			continue
		}
		if line[0] == ':' {
			continue
		}
		if r.Bare && line[0] == '{' {
			return Event{Data: string(line), Bare: true}, nil
		}
		started = true
		field, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(field) {
		case "event":
			ev.Name = string(value)
		case "data":
			if n := data.Len() + len(value); n > MaxLine || (hasData && n+1 > MaxLine) {
				return Event{}, ErrLineTooLong
			}
			if hasData {
				data.WriteByte('\n')
			}
			data.Write(value)
			hasData = true
		}
	}
	if err := r.sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return Event{}, ErrLineTooLong
		}
		return Event{}, fmt.Errorf("sse: %w", err)
	}
	if started {
		return Event{}, io.ErrUnexpectedEOF
	}
	return Event{}, io.EOF
}
