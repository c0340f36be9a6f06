package protocol_test

import (
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/protocol"
)

// TestKeysMatchedAsEncodingJSON pins what protocol.md says of names: a
// key that differs from a field's only in case is taken for it, and of a
// repeated key the last value counts, in binary headers (off the fast
// path) as in text messages.
func TestKeysMatchedAsEncodingJSON(t *testing.T) {
	frame := func(hdr string) []byte {
		b := binary.BigEndian.AppendUint32(nil, uint32(len(hdr)))
		return append(append(b, hdr...), 0, 0)
	}
	a, err := protocol.DecodeBinaryAudio(frame(`{"type":"audio","requestID":"r1","DeadlineAt":5,"seq":0,"final":false,"final":true}`))
	require.NoError(t, err)
	require.Equal(t, protocol.AudioHeader{Type: protocol.TypeAudio, RequestID: "r1", DeadlineAt: 5, Final: true}, a.Header)

	m, err := protocol.DecodeText([]byte(`{"type":"cancel","RequestId":"a","requestId":"b"}`))
	require.NoError(t, err)
	require.Equal(t, "b", m.(*protocol.Cancel).RequestID)
}
