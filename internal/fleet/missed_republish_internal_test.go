package fleet

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/fleet/redistest"
)

// TestMissedKeptDuringOutageReachRedis: a connection drops while Redis is
// away, and its terminals are kept in this instance's memory. Redis comes
// back; the client resumes on another instance (this one is draining, or
// the balancer picked another). It must receive them, exactly once: they
// were never written to Redis after its return, so only a resume on this
// very instance could ever get them.
func TestMissedKeptDuringOutageReachRedis(t *testing.T) {
	srv := redistest.Start(t)
	a, b := manual(t, srv), manual(t, srv)
	ca, cb := NewConversations(a, time.Minute), NewConversations(b, time.Minute)

	a.up.Store(false)
	ca.AddMissed("c", []byte("m1")) // Redis away: kept here
	ca.AddMissed("c", []byte("m2"))
	a.up.Store(true) // found again: Run's check runs the upkeep
	upkeep(t, a)
	drain(t, a)

	got, err := cb.TakeMissed(t.Context(), "c")
	require.NoError(t, err)
	require.Equal(t, [][]byte{[]byte("m1"), []byte("m2")}, got, "the resume on another instance gets them")
	again, err := ca.TakeMissed(t.Context(), "c")
	require.NoError(t, err)
	require.Empty(t, again, "exactly once")
}

// TestMissedRepublishFailsKeepsThem: the write after Redis's return fails
// too: they stay here, for a resume here or the next upkeep.
func TestMissedRepublishFailsKeepsThem(t *testing.T) {
	srv := redistest.Start(t)
	a := manual(t, srv)
	ca := NewConversations(a, time.Minute)

	a.up.Store(false)
	ca.AddMissed("c", []byte("m1"))
	a.up.Store(true)
	srv.Stop()
	upkeep(t, a)
	drain(t, a) // fails: kept here again
	srv.Restart()
	upkeep(t, a)
	drain(t, a)

	b := manual(t, srv)
	got, err := NewConversations(b, time.Minute).TakeMissed(t.Context(), "c")
	require.NoError(t, err)
	require.Equal(t, [][]byte{[]byte("m1")}, got)
}
