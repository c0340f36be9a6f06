package fleet

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/fleet/redistest"
	"github.com/voiced/voiced/internal/session"
)

// TestMissedTerminalsAgeEach: terminals are kept for session.MissedTTL
// (protocol.md, Resume). Redis's list had one expiry, renewed by each
// write: a conversation whose terminals kept coming (one every 90 s
// here) had its oldest replayed long after their 2 minutes. Each now
// ages from its own keep time; a list an older build wrote (unstamped, in
// a rolling deploy) is still taken.
func TestMissedTerminalsAgeEach(t *testing.T) {
	srv := redistest.Start(t)
	r := manual(t, srv)
	c := NewConversations(r, time.Hour)
	t0 := time.Now()
	clock := t0
	c.now = func() time.Time { return clock }
	at := func(d time.Duration) { clock = t0.Add(d) }
	type kept struct {
		at  time.Duration // after t0
		msg string
	}

	for _, tc := range []struct {
		name string
		keep []kept
		take time.Duration
		want []string
	}{
		{"all within their TTL", []kept{{0, "m1"}, {90 * time.Second, "m2"}}, 100 * time.Second, []string{"m1", "m2"}},
		{"the oldest past its TTL", []kept{{0, "m1"}, {90 * time.Second, "m2"}}, 130 * time.Second, []string{"m2"}},
		{"all past their TTL", []kept{{0, "m1"}, {10 * time.Second, "m2"}}, 10*time.Second + session.MissedTTL, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := tc.name
			for _, k := range tc.keep {
				at(k.at)
				c.AddMissed(id, []byte(k.msg))
				drain(t, r) // in Redis, each by its own write
			}
			at(tc.take)
			got, err := c.TakeMissed(t.Context(), id)
			require.NoError(t, err)
			var want [][]byte
			for _, m := range tc.want {
				want = append(want, []byte(m))
			}
			require.Equal(t, want, got)
		})
	}

	t.Run("an older build's list", func(t *testing.T) {
		raw := redis.NewClient(&redis.Options{Addr: srv.Addr, DisableIdentity: true})
		defer raw.Close()
		require.NoError(t, raw.RPush(t.Context(), "voiced:missed:old", "m0").Err())
		at(0)
		c.AddMissed("old", []byte("m1"))
		drain(t, r)
		got, err := c.TakeMissed(t.Context(), "old")
		require.NoError(t, err)
		require.Equal(t, [][]byte{[]byte("m0"), []byte("m1")}, got, "the older build's first")
	})
}
