package twilio

import (
	"encoding/base64"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// mediaMessage is caller audio with the given sequenceNumber and chunk.
func mediaMessage(t *testing.T, seq, chunk int) Message {
	t.Helper()
	m, err := Parse([]byte(fmt.Sprintf(`{"event":"media","sequenceNumber":"%d","streamSid":"MZ22","media":{"track":"inbound","chunk":"%d","timestamp":"%d","payload":"%s"}}`,
		seq, chunk, 20*chunk, base64.StdEncoding.EncodeToString(make([]byte, 160)))))
	require.NoError(t, err)
	return m
}

// One lost media message should be reported once; the stream then goes
// on from the message received ("a gap is logged, not fatal").
func TestSequenceGoesOnAfterAGap(t *testing.T) {
	media := func(seq, chunk int) Message { return mediaMessage(t, seq, chunk) }
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

// TestSequenceDuplicate: Twilio resends media (same sequenceNumber and
// chunk) on a retransmit or reconnect. A resent message is reported as a
// duplicate, distinct from a gap, and leaves the state alone: the next
// new message is in order.
func TestSequenceDuplicate(t *testing.T) {
	media := func(seq, chunk int) Message { return mediaMessage(t, seq, chunk) }
	var q Sequence
	start, err := Parse([]byte(call[1]))
	require.NoError(t, err)
	require.NoError(t, q.Check(start))
	require.NoError(t, q.Check(media(2, 1)))
	require.NoError(t, q.Check(media(3, 2)))
	require.ErrorIs(t, q.Check(media(3, 2)), ErrDuplicate, "resent")
	require.ErrorIs(t, q.Check(media(2, 1)), ErrDuplicate, "an older one resent")
	require.ErrorIs(t, q.Check(start), ErrDuplicate, "start resent")
	require.NoError(t, q.Check(media(4, 3)), "in order after the duplicates")
	err = q.Check(media(6, 5))
	require.ErrorIs(t, err, ErrSequence, "a gap")
	require.NotErrorIs(t, err, ErrDuplicate, "a gap is not a duplicate")
}

// TestSequenceDuplicateChunkNewNumber: a chunk sent again under a new
// sequenceNumber is a duplicate, but its number was used: the message
// after it is in order. The number was not recorded, so the next message
// was logged as a gap ("sequenceNumber 5 after 3").
func TestSequenceDuplicateChunkNewNumber(t *testing.T) {
	media := func(seq, chunk int) Message { return mediaMessage(t, seq, chunk) }
	var q Sequence
	start, err := Parse([]byte(call[1]))
	require.NoError(t, err)
	require.NoError(t, q.Check(start))
	require.NoError(t, q.Check(media(2, 1)))
	require.NoError(t, q.Check(media(3, 2)))
	require.ErrorIs(t, q.Check(media(4, 2)), ErrDuplicate, "chunk 2 again")
	require.NoError(t, q.Check(media(5, 3)), "in order after the duplicate chunk")
	require.ErrorIs(t, q.Check(media(5, 3)), ErrDuplicate, "the whole message again")
}
