package protocol_test

import (
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/protocol"
)

// TestNullHeaderRefused: a binary frame's header is a JSON object. A bare
// null is not one, though encoding/json decodes it as an empty object
// without complaint: a server-turn stream took it for the frame {"seq":0}.
// It is a session-level bad_message, naming no request and no frame.
func TestNullHeaderRefused(t *testing.T) {
	for _, tc := range []struct {
		name   string
		in     protocol.Inbound
		header string
	}{
		{"client turns", protocol.Inbound{}, `null`},
		{"server turns", protocol.Inbound{ServerTurns: true}, `null`},
		{"server turns, white space", protocol.Inbound{ServerTurns: true}, " \n null\t"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			frame := binary.BigEndian.AppendUint32(nil, uint32(len(tc.header)))
			frame = append(append(frame, tc.header...), 0, 0)
			a, err := tc.in.DecodeBinaryAudio(frame)
			require.Error(t, err)
			require.Equal(t, protocol.CodeBadMessage, protocol.CodeOf(err))
			require.Empty(t, a.Header.RequestID)
			require.Equal(t, int64(-1), a.Header.Seq, "no frame's seq")
		})
	}
	// An object with nothing in it is still a frame at seq 0.
	frame := binary.BigEndian.AppendUint32(nil, 2)
	_, err := protocol.Inbound{ServerTurns: true}.DecodeBinaryAudio(append(frame, "{}"...))
	require.NoError(t, err)
}
