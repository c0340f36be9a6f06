package protocol_test

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/protocol"
)

// TestWrongTypeNamesTheField: a value of the wrong JSON type is reported
// with the field's protocol name and what it must be, in the protocol's
// terms. encoding/json's own wording ("cannot unmarshal string into Go
// struct field AudioHeader.seq of type int64") named the server's Go types,
// and an envelope whose type was not a string was called malformed JSON.
func TestWrongTypeNamesTheField(t *testing.T) {
	for _, tc := range []struct {
		name, msg string
		binary    bool
		want      string
	}{
		{"seq a string", `{"type":"audio","requestId":"r1","deadlineAt":5,"seq":"x","audio":""}`, false,
			`audio message: "seq": want an integer, got a string`},
		{"deadlineAt a fraction", `{"type":"audio","requestId":"r1","deadlineAt":1.5,"seq":0}`, true,
			`audio header: "deadlineAt": want an integer, got 1.5`},
		{"requestId a number", `{"type":"audio","requestId":5,"deadlineAt":5,"seq":0,"audio":""}`, false,
			`audio message: "requestId": want a string, got a number`},
		{"final a string", `{"type":"audio","requestId":"r1","deadlineAt":5,"seq":0,"final":"yes","audio":""}`, false,
			`audio message: "final": want true or false, got a string`},
		{"ping clientTime", `{"type":"ping","clientTime":"now"}`, false,
			`ping: "clientTime": want an integer, got a string`},
		{"nested field", `{"type":"session.update","turnDetection":{"mode":"server","silenceMs":"500"}}`, false,
			`session.update: "turnDetection.silenceMs": want an integer, got a string`},
		{"object for an object field", `{"type":"session.update","turnDetection":[1]}`, false,
			`session.update: "turnDetection": want an object, got an array`},
		{"type not a string", `{"type":5}`, false,
			`"type": want a string, got a number`},
		{"unknown field", `{"type":"cancel","requestId":"r1","why":1}`, false,
			`cancel: unknown field "why"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			if tc.binary {
				frame := binary.BigEndian.AppendUint32(nil, uint32(len(tc.msg)))
				_, err = protocol.DecodeBinaryAudio(append(frame, tc.msg...))
			} else {
				_, err = protocol.DecodeText([]byte(tc.msg))
			}
			var perr *protocol.Error
			require.True(t, errors.As(err, &perr), "%v", err)
			require.Equal(t, protocol.CodeBadMessage, perr.Code)
			require.Equal(t, tc.want, perr.Message)
		})
	}
}

// TestMissingDeadlineSaysSo: a frame without deadlineAt was answered "got
// 0", a value the client never sent; the message says it is missing.
func TestMissingDeadlineSaysSo(t *testing.T) {
	_, err := protocol.DecodeText([]byte(`{"type":"audio","requestId":"r1","seq":0,"final":true,"audio":""}`))
	var perr *protocol.Error
	require.True(t, errors.As(err, &perr), "%v", err)
	require.Equal(t, protocol.CodeBadMessage, perr.Code)
	require.Equal(t, "deadlineAt is missing (or 0): want a positive integer of milliseconds since the Unix epoch, on the server's clock", perr.Message)
}
