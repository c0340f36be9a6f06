package fleet

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/fleet/redistest"
	"github.com/voiced/voiced/internal/session"
)

// TestMissedKeptDuringOutageKeepTheirTime: a terminal kept here while
// Redis is away is kept for session.MissedTTL from when it was kept, not
// from when Redis takes it after its return. Its write stamped it with
// the time of the write: kept 90 s here, it then lived 2 more minutes in
// Redis.
func TestMissedKeptDuringOutageKeepTheirTime(t *testing.T) {
	for _, tc := range []struct {
		name string
		take time.Duration // after it was kept
		want [][]byte
	}{
		{"within its TTL", session.MissedTTL - time.Second, [][]byte{[]byte("m1")}},
		{"past its TTL", session.MissedTTL + time.Second, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := redistest.Start(t)
			a, b := manual(t, srv), manual(t, srv)
			ca, cb := NewConversations(a, time.Hour), NewConversations(b, time.Hour)
			t0 := time.Now()
			clock := t0
			ca.now = func() time.Time { return clock }
			cb.now = ca.now

			a.up.Store(false)
			ca.AddMissed("c", []byte("m1")) // Redis away: kept here
			clock = t0.Add(90 * time.Second)
			a.up.Store(true)
			upkeep(t, a)
			drain(t, a) // in Redis now

			clock = t0.Add(tc.take)
			got, err := cb.TakeMissed(t.Context(), "c")
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}
