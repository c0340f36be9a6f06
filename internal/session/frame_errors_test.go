package session_test

import (
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/pipeline"
	"github.com/voiced/voiced/internal/protocol"
	"github.com/voiced/voiced/internal/session"
)

// TestTombstonesCountEachEndOnce: every ended request takes one of the
// session's -tombstones slots. A cancelled request took two (one when it
// was ended, one when its terminal was queued), so its frames were
// answered with bad_message after half as many ends as documented.
func TestTombstonesCountEachEndOnce(t *testing.T) {
	const slots = 4
	h := newHarness(t, &fakeStages{}, pipeline.Config{}, session.Config{Tombstones: slots})
	c := h.dial()
	dl := time.Now().Add(5 * time.Second)
	for i := range slots + 1 {
		id := fmt.Sprintf("r%d", i)
		c.audio(id, 0, false, dl)
		c.sendJSON(protocol.Cancel{Type: protocol.TypeCancel, RequestID: id})
		term, _ := c.terminal(id)
		require.Equal(t, protocol.CodeCancelled, errorOf(t, term).Code)
	}
	// r1 ended slots requests ago: still remembered, its frame ignored.
	c.audio("r1", 1, false, dl)
	require.Empty(t, c.ping())
	// r0 ended slots+1 requests ago: forgotten, a session-level error.
	c.audio("r0", 1, false, dl)
	msgs := c.ping()
	require.Len(t, msgs, 1)
	e := errorOf(t, msgs[0])
	require.Equal(t, protocol.CodeBadMessage, e.Code)
	require.Empty(t, e.RequestID)
}

// TestUndecodableHeaderNamingARequest: an audio header that is valid JSON
// but does not decode (a value of the wrong type, an unknown field) is the
// error of the request it names, as protocol.md says: it ends the request
// in flight, or refuses the request its first frame would open. It was a
// session-level error, which left the request in flight to its deadline
// and answered each of its later frames with bad_message again.
func TestUndecodableHeaderNamingARequest(t *testing.T) {
	dl := time.Now().Add(5 * time.Second)
	ms := protocol.Millis(dl)
	binaryFrame := func(header string) []byte {
		b := binary.BigEndian.AppendUint32(nil, uint32(len(header)))
		return append(append(b, header...), 1, 0, 2, 0)
	}
	tests := []struct {
		name     string
		inFlight bool   // r1 is open when the bad frame arrives
		text     string // sent as a text message when set
		header   string // otherwise a binary frame's header
		wantID   string // the error's requestId ("" session-level)
	}{
		{name: "binary, in flight, non-integer deadlineAt", inFlight: true,
			header: fmt.Sprintf(`{"type":"audio","requestId":"r1","deadlineAt":%d.5,"seq":1}`, ms), wantID: "r1"},
		{name: "text, in flight, unknown field", inFlight: true,
			text: fmt.Sprintf(`{"type":"audio","requestId":"r1","deadlineAt":%d,"seq":1,"volume":3,"audio":"AQACAA=="}`, ms), wantID: "r1"},
		{name: "binary, in flight, seq of the wrong type", inFlight: true,
			header: fmt.Sprintf(`{"type":"audio","requestId":"r1","deadlineAt":%d,"seq":"1"}`, ms), wantID: "r1"},
		{name: "binary, first frame, non-integer deadlineAt",
			header: fmt.Sprintf(`{"type":"audio","requestId":"r1","deadlineAt":%d.5,"seq":0}`, ms), wantID: "r1"},
		{name: "text, first frame without seq, final of the wrong type",
			text: fmt.Sprintf(`{"type":"audio","requestId":"r1","deadlineAt":%d,"final":"yes","audio":"AQACAA=="}`, ms), wantID: "r1"},
		{name: "binary, no request in flight, non-integer seq",
			header: fmt.Sprintf(`{"type":"audio","requestId":"r1","deadlineAt":%d,"seq":1.5}`, ms)},
		{name: "binary, malformed JSON",
			header: fmt.Sprintf(`{"type":"audio","requestId":"r1","deadlineAt":%d,`, ms)},
		// Keys are matched as encoding/json matches them (protocol.md):
		// in another case, a key is still the field's.
		{name: "binary, in flight, requestID in another case, non-integer deadlineAt", inFlight: true,
			header: fmt.Sprintf(`{"type":"audio","requestID":"r1","deadlineAt":%d.5,"seq":1}`, ms), wantID: "r1"},
		{name: "text, no request in flight, Seq in another case not an integer",
			text: fmt.Sprintf(`{"type":"audio","requestId":"r1","deadlineAt":%d,"Seq":"1","audio":"AQACAA=="}`, ms)},
		{name: "binary, requestId of the wrong type",
			header: fmt.Sprintf(`{"type":"audio","requestId":1,"deadlineAt":%d,"seq":0}`, ms)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, &fakeStages{}, pipeline.Config{}, session.Config{})
			c := h.dial()
			if tt.inFlight {
				c.audio("r1", 0, false, dl)
			}
			if tt.text != "" {
				c.sendText(tt.text)
			} else {
				c.sendBinary(binaryFrame(tt.header))
			}
			e := errorOf(t, c.next())
			require.Equal(t, protocol.CodeBadMessage, e.Code, e.Message)
			require.Equal(t, tt.wantID, e.RequestID, e.Message)
			if tt.wantID == "" {
				require.Empty(t, c.ping())
				return
			}
			// The request has had its terminal: the rest of its frames
			// are ignored, not answered one by one.
			c.audio("r1", 2, true, dl)
			require.Empty(t, c.ping())
		})
	}
}
