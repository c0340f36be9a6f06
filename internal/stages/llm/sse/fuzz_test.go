package sse

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/fuzzcheck"
)

// FuzzReader reads arbitrary streams. The events and the final error must
// be those of the format as the package documents it (reference below),
// whether the stream arrives whole or a byte at a time; the error is one
// callers test for; and the events, written again, read back the same.
func FuzzReader(f *testing.F) {
	f.Fuzz(func(t *testing.T, stream []byte) {
		var (
			got []Event
			err error
		)
		// The scanner's buffer plus the event text.
		fuzzcheck.AllocBounded(t, len(stream), 8, func() { got, err = readAll(bytes.NewReader(stream)) })
		require.True(t, err == io.EOF || err == io.ErrUnexpectedEOF || err == ErrLineTooLong, "unexpected error %v", err)

		want, wantErr := reference(stream)
		require.Equal(t, want, got)
		require.Equal(t, wantErr, err)

		got, err = readAll(iotest.OneByteReader(bytes.NewReader(stream)))
		require.Equal(t, want, got, "read a byte at a time")
		require.Equal(t, wantErr, err, "read a byte at a time")

		again, err := readAll(bytes.NewReader(encode(want)))
		require.Equal(t, io.EOF, err)
		require.Equal(t, want, again, "written again")
	})
}

// readAll reads events until the first error. A stream yields fewer events
// than lines, so more calls than that means Next is not advancing.
func readAll(r io.Reader) ([]Event, error) {
	var (
		evs   []Event
		calls int
	)
	rd := NewReader(r)
	for {
		ev, err := rd.Next()
		if err != nil {
			return evs, err
		}
		evs = append(evs, ev)
		if calls++; calls > 1<<20 {
			return evs, errors.New("Next does not advance")
		}
	}
}

// reference reads a stream the obvious way, from the package documentation:
// lines end in LF or CRLF (a last line may lack its end), blank lines end
// events, ":" starts a comment, an event counts only with a data line, and
// neither a line nor an event's joined data may exceed MaxLine.
func reference(stream []byte) ([]Event, error) {
	lines := strings.Split(string(stream), "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1] // the stream ended with its last line's end
	}
	var (
		out     []Event
		ev      Event
		data    []string
		started bool
	)
	for _, l := range lines {
		l = strings.TrimSuffix(l, "\r")
		if len(l) > MaxLine {
			return out, ErrLineTooLong
		}
		switch {
		case l == "":
			if data != nil {
				ev.Data = strings.Join(data, "\n")
				out = append(out, ev)
			}
			ev, data, started = Event{}, nil, false
		case l[0] == ':':
		default:
			started = true
			field, value, _ := strings.Cut(l, ":")
			value = strings.TrimPrefix(value, " ")
			switch field {
			case "event":
				ev.Name = value
			case "data":
				data = append(data, value)
				if len(strings.Join(data, "\n")) > MaxLine {
					return out, ErrLineTooLong
				}
			}
		}
	}
	if started {
		return out, io.ErrUnexpectedEOF
	}
	return out, io.EOF
}

// encode writes events in the plainest form, with CRLF line ends so that
// a value ending in CR keeps it.
func encode(evs []Event) []byte {
	var b bytes.Buffer
	for _, ev := range evs {
		if ev.Name != "" {
			b.WriteString("event: " + ev.Name + "\r\n")
		}
		for _, l := range strings.Split(ev.Data, "\n") {
			b.WriteString("data: " + l + "\r\n")
		}
		b.WriteString("\r\n")
	}
	return b.Bytes()
}
