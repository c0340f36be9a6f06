package twilio

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSequenceTracksBounded: Sequence keeps a chunk count per track, and
// the track is whatever the peer writes in media.track. The session
// checks the sequence of every message, before a call has authenticated
// (its start message), so a peer that names a new track in each media
// message must not grow the per-track state with each one.
func TestSequenceTracksBounded(t *testing.T) {
	var q Sequence
	long := strings.Repeat("t", 1000)
	for i := range 10_000 {
		m, err := Parse(fmt.Appendf(nil, `{"event":"media","sequenceNumber":"%d","streamSid":"MZ1","media":{"track":"%s%d","chunk":"1","timestamp":"0","payload":""}}`,
			i+1, long, i))
		require.NoError(t, err)
		_ = q.Check(m)
	}
	keyBytes := 0
	for k := range q.chunks {
		keyBytes += len(k)
	}
	require.LessOrEqual(t, len(q.chunks), 2, "tracks remembered: %d (%d bytes of names)", len(q.chunks), keyBytes)
}
