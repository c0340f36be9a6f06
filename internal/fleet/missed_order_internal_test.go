package fleet

import (
	"fmt"

	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/fleet/redistest"
	"github.com/voiced/voiced/internal/session"
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

// TestTakeMissedKeepsLastMaxMissed: a conversation's terminals land in
// two places across an outage, session.MaxMissed in Redis and as many
// more kept here. A take gives the last session.MaxMissed, as the store
// promises (session.ConversationStore, protocol.md): a resumed session's
// outbound queue is sized for that burst (session.MinOutboundQueue), and
// a take gave up to twice as many and more, which with what the session
// queues besides could close it as a slow client (1008) before it read
// one.
func TestTakeMissedKeepsLastMaxMissed(t *testing.T) {
	srv := redistest.Start(t)
	r := manual(t, srv)
	c := NewConversations(r, time.Minute)

	var want [][]byte
	for i := range 2 * session.MaxMissed {
		if i == session.MaxMissed {
			drain(t, r) // the first ones in Redis
			r.up.Store(false)
		}
		m := []byte(fmt.Sprintf("m%d", i))
		c.AddMissed("c", m) // then Redis away: kept here
		if i >= session.MaxMissed {
			want = append(want, m)
		}
	}
	r.up.Store(true)

	got, err := c.TakeMissed(t.Context(), "c")
	require.NoError(t, err)
	require.Equal(t, want, got, "the last MaxMissed, oldest first")
}
