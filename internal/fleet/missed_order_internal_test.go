package fleet

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/fleet/redistest"
)

// TestTakeMissedOrderAcrossOutage: a terminal written to Redis, then one
// kept here while Redis was away (lost, or the write failed); Redis
// comes back and the client resumes here. TakeMissed promises oldest
// first (session.ConversationStore), but put this instance's copies
// before Redis's list, whatever their age: the newer terminal came first.
// A take that runs before the failed write's fallback (the terminal still
// in pending's failed) already puts it after Redis's: where it lands
// depended on that timing.
func TestTakeMissedOrderAcrossOutage(t *testing.T) {
	srv := redistest.Start(t)
	r := manual(t, srv)
	c := NewConversations(r, time.Minute)

	c.AddMissed("c", []byte("m1"))
	drain(t, r) // in Redis
	r.up.Store(false)
	c.AddMissed("c", []byte("m2")) // Redis away: kept here
	r.up.Store(true)

	got, err := c.TakeMissed(t.Context(), "c")
	require.NoError(t, err)
	require.Equal(t, [][]byte{[]byte("m1"), []byte("m2")}, got, "oldest first")
}

// TestTakeMissedOrderAfterOutage: the mirror of the case above. A
// terminal kept here while Redis was away (m1), Redis comes back and the
// next terminal of the conversation is written to Redis (m2). Redis's
// list first (the order above) gives the newer one first.
func TestTakeMissedOrderAfterOutage(t *testing.T) {
	srv := redistest.Start(t)
	r := manual(t, srv)
	c := NewConversations(r, time.Minute)

	r.up.Store(false)
	c.AddMissed("c", []byte("m1")) // Redis away: kept here
	r.up.Store(true)
	c.AddMissed("c", []byte("m2"))
	drain(t, r) // in Redis

	got, err := c.TakeMissed(t.Context(), "c")
	require.NoError(t, err)
	require.Equal(t, [][]byte{[]byte("m1"), []byte("m2")}, got, "oldest first")
}
