package protocol_test

import (
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/protocol"
)

// TestUndecodableHeaderKeysMatchedAsEncodingJSON: a header that fails
// to decode (a value of the wrong type, an unknown field) is tied to the
// request its requestId names, and its seq read, by the same names as a
// header that decodes (protocol.md: a key that differs only in case is
// that field's, and of a repeated key the last counts). A seq that is not
// an integer, however its key is spelt, reads as a later frame (-1), so
// that it can never refuse, with a terminal message, an id it did not open.
func TestUndecodableHeaderKeysMatchedAsEncodingJSON(t *testing.T) {
	for _, tc := range []struct {
		name    string
		header  string
		id      string
		seq     int64
		binary  bool
		errCode protocol.Code
	}{
		{"requestID with a bad deadlineAt", `{"type":"audio","requestID":"r1","deadlineAt":"soon","seq":3}`, "r1", 3, false, protocol.CodeBadMessage},
		{"RequestId with an unknown field", `{"type":"audio","RequestId":"r1","seq":2,"extra":1}`, "r1", 2, true, protocol.CodeBadMessage},
		{"Seq not an integer", `{"type":"audio","requestId":"r1","Seq":"x","deadlineAt":5}`, "r1", -1, false, protocol.CodeBadMessage},
		{"SEQ not an integer, binary", `{"type":"audio","requestId":"r1","SEQ":1.5,"deadlineAt":5}`, "r1", -1, true, protocol.CodeBadMessage},
		{"last of repeated ids", `{"type":"audio","requestId":"a","RequestID":"b","seq":0,"deadlineAt":"x"}`, "b", 0, false, protocol.CodeBadMessage},
		{"exact spelling still read", `{"type":"audio","requestId":"r1","seq":4,"deadlineAt":"x"}`, "r1", 4, true, protocol.CodeBadMessage},
		{"id not a string", `{"type":"audio","requestID":5,"seq":0,"deadlineAt":"x"}`, "", -1, false, protocol.CodeBadMessage},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var a protocol.Audio
			var err error
			if tc.binary {
				frame := binary.BigEndian.AppendUint32(nil, uint32(len(tc.header)))
				a, err = protocol.DecodeBinaryAudio(append(frame, tc.header...))
			} else {
				var m any
				m, err = protocol.DecodeText([]byte(tc.header))
				a = *m.(*protocol.Audio)
			}
			require.Error(t, err)
			require.Equal(t, tc.errCode, protocol.CodeOf(err))
			require.Equal(t, tc.id, a.Header.RequestID)
			require.Equal(t, tc.seq, a.Header.Seq)
		})
	}
}
