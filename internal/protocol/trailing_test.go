package protocol

import (
	"encoding/binary"
	"testing"
)

// TestBinaryHeaderTrailingData: a binary frame's JSON header followed by
// anything but whitespace is refused, by the fast path and by the strict
// decoder alike (json.Decoder.More took a '}' or ']' for the end of a
// list, so "{...}}" passed).
func TestBinaryHeaderTrailingData(t *testing.T) {
	for _, hdr := range []string{
		`{"type":"audio","requestId":"r1","deadlineAt":1,"seq":0,"final":true}}`,
		`{"type":"audio","requestId":"r1","deadlineAt":1,"seq":0,"final":true}]]]`,
		`{"type":"audio","requestId":"r1","deadlineAt":1,"seq":0,"final":true}}garbage`,
		`{"type":"audio","requestId":"r1","deadlineAt":1,"seq":0,"final":true} x`,
	} {
		frame := binary.BigEndian.AppendUint32(nil, uint32(len(hdr)))
		frame = append(frame, hdr...)
		frame = append(frame, 0, 0)
		if _, err := DecodeBinaryAudio(frame); err == nil {
			t.Errorf("header %q with trailing data accepted", hdr)
		}
		var h AudioHeader
		if fastHeader([]byte(hdr), &h) {
			t.Errorf("fast path accepted %q", hdr)
		}
	}
	// Whitespace after the object is no trailing data.
	hdr := `{"type":"audio","requestId":"r1","deadlineAt":1,"seq":0,"final":true} ` + "\n"
	frame := binary.BigEndian.AppendUint32(nil, uint32(len(hdr)))
	frame = append(frame, hdr...)
	frame = append(frame, 0, 0)
	if _, err := DecodeBinaryAudio(frame); err != nil {
		t.Errorf("header with trailing whitespace refused: %v", err)
	}
}
