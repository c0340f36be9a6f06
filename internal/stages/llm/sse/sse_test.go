package sse

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestReader(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    []Event
		wantErr error
	}{
		{"lf", "data: a\n\ndata: b\n\n", []Event{{Data: "a"}, {Data: "b"}}, io.EOF},
		{"crlf", "data: a\r\n\r\ndata:b\r\n\r\n", []Event{{Data: "a"}, {Data: "b"}}, io.EOF},
		{"named", "event: ping\ndata: {}\n\n", []Event{{Name: "ping", Data: "{}"}}, io.EOF},
		{"multi data lines joined", "data: a\ndata: b\n\n", []Event{{Data: "a\nb"}}, io.EOF},
		{"comments and id ignored", ": keepalive\nid: 3\nretry: 10\ndata: x\n\n", []Event{{Data: "x"}}, io.EOF},
		{"event without data skipped", "event: x\n\ndata: y\n\n", []Event{{Data: "y"}}, io.EOF},
		{"cut mid event", "data: a\n\ndata: b", []Event{{Data: "a"}}, io.ErrUnexpectedEOF},
		{"cut after data line", "data: a\n\ndata: b\n", []Event{{Data: "a"}}, io.ErrUnexpectedEOF},
		{"empty", "", nil, io.EOF},
		{"too long", "data: " + strings.Repeat("x", MaxLine+1) + "\n\n", nil, ErrLineTooLong},
		// The limit is on the line without its end: it used to count the
		// LF (and the CR), refusing a line of exactly MaxLine bytes.
		{"longest line, LF", "data:" + strings.Repeat("x", MaxLine-5) + "\n\n", []Event{{Data: strings.Repeat("x", MaxLine-5)}}, io.EOF},
		{"longest line, CRLF", "data:" + strings.Repeat("x", MaxLine-5) + "\r\n\r\n", []Event{{Data: strings.Repeat("x", MaxLine-5)}}, io.EOF},
		{"one byte too long, CRLF", "data:" + strings.Repeat("x", MaxLine-4) + "\r\n\r\n", nil, ErrLineTooLong},
		{"one byte too long at the end", "data:" + strings.Repeat("x", MaxLine-4), nil, ErrLineTooLong},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewReader(strings.NewReader(tt.in))
			var got []Event
			var err error
			for {
				var ev Event
				ev, err = r.Next()
				if err != nil {
					break
				}
				got = append(got, ev)
			}
			require.Equal(t, tt.want, got)
			require.True(t, errors.Is(err, tt.wantErr), "err = %v", err)
		})
	}
}

// TestReaderBare: a JSON object sent without "data:" (Gemini's error
// mid-stream) is an unknown field, ignored, unless the reader asks for
// bare lines; then it is an event of its own.
func TestReaderBare(t *testing.T) {
	const in = "data: a\n\n{\"error\":{}}\r\n\r\ndata: b\n\n{\"error\":{}}"
	for _, tt := range []struct {
		bare bool
		want []Event
	}{
		{false, []Event{{Data: "a"}, {Data: "b"}}},
		{true, []Event{{Data: "a"}, {Data: `{"error":{}}`, Bare: true}, {Data: "b"}, {Data: `{"error":{}}`, Bare: true}}},
	} {
		r := NewReader(strings.NewReader(in))
		r.Bare = tt.bare
		var got []Event
		var err error
		for {
			var ev Event
			if ev, err = r.Next(); err != nil {
				break
			}
			got = append(got, ev)
		}
		require.Equal(t, tt.want, got, "bare %v", tt.bare)
		wantErr := io.EOF
		if !tt.bare {
			wantErr = io.ErrUnexpectedEOF // the last line began an event that never ended
		}
		require.ErrorIs(t, err, wantErr, "bare %v", tt.bare)
	}
}
