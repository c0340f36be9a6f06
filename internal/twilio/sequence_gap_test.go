package twilio

import (
	"encoding/base64"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// One lost media message should be reported once; the stream then goes
// on from the message received ("a gap is logged, not fatal").
func TestSequenceGoesOnAfterAGap(t *testing.T) {
	media := func(seq, chunk int) Message {
		m, err := Parse([]byte(fmt.Sprintf(`{"event":"media","sequenceNumber":"%d","streamSid":"MZ22","media":{"track":"inbound","chunk":"%d","timestamp":"%d","payload":"%s"}}`,
			seq, chunk, 20*chunk, base64.StdEncoding.EncodeToString(make([]byte, 160)))))
		require.NoError(t, err)
		return m
	}
	var q Sequence
	start, err := Parse([]byte(call[1]))
	require.NoError(t, err)
	require.NoError(t, q.Check(start))
	require.NoError(t, q.Check(media(2, 1)))
	require.ErrorIs(t, q.Check(media(4, 3)), ErrSequence, "message 3 (chunk 2) lost")
	// Everything after the gap is in order.
	for i := 0; i < 5; i++ {
		require.NoError(t, q.Check(media(5+i, 4+i)), "in order after the gap: seq %d chunk %d", 5+i, 4+i)
	}
}
