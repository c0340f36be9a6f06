package fleet

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/fleet/redistest"
)

// upkeep runs what r's Run runs after a check that finds Redis up.
func upkeep(t *testing.T, r *Redis) {
	t.Helper()
	r.pollMu.Lock()
	fs := r.upkeep
	r.pollMu.Unlock()
	for _, f := range fs {
		f(t.Context())
	}
}

// TestCooldownLearnedDuringOutagePublished: a provider asks this instance
// for a pause while Redis is away; the cooldown is kept here, but once
// Redis returns the other instances must hear of it too, or they keep
// sending to a provider this one knows is cooling down.
func TestCooldownLearnedDuringOutagePublished(t *testing.T) {
	srv := redistest.Start(t)
	a, b := manual(t, srv), manual(t, srv)
	ca, cb := NewCooldowns(a, nil), NewCooldowns(b, nil)
	const key = "openai/gpt-4o-mini"

	a.up.Store(false) // Redis lost
	ca.Start(key, time.Now().Add(30*time.Second), "quota")
	require.True(t, ca.Until(key).After(time.Now()), "kept here")
	a.up.Store(true) // Redis found again: Run's check runs the upkeep
	upkeep(t, a)
	drain(t, a)

	require.NoError(t, cb.refresh(t.Context()))
	require.True(t, cb.Until(key).After(time.Now().Add(25*time.Second)),
		"the other instance honours the cooldown learned during the outage")
}

// TestCooldownPublishFailedRepublished: the cooldown's write failed (Redis
// restarting, not yet found lost); it is sent again after the next check
// that finds Redis up.
func TestCooldownPublishFailedRepublished(t *testing.T) {
	srv := redistest.Start(t)
	a, b := manual(t, srv), manual(t, srv)
	ca, cb := NewCooldowns(a, nil), NewCooldowns(b, nil)
	const key = "anthropic/claude"

	ca.Start(key, time.Now().Add(30*time.Second), "rate_limit")
	srv.Stop()
	drain(t, a) // the write fails: connection refused
	srv.Restart()
	upkeep(t, a)
	drain(t, a)

	require.NoError(t, cb.refresh(t.Context()))
	require.True(t, cb.Until(key).After(time.Now().Add(25*time.Second)))
}

// TestCooldownsSurviveClockSkew: instances' clocks differ. One whose clock
// is an hour ahead starts a 30 s cooldown; another whose clock is an hour
// behind starts one too. Each other instance must skip the provider for
// about 30 s: not 1 h 30 min (the first's end read as an absolute time),
// and not at all (the second's, read as an hour past, and deleted).
func TestCooldownsSurviveClockSkew(t *testing.T) {
	srv := redistest.Start(t)
	ahead, behind, right := manual(t, srv), manual(t, srv), manual(t, srv)
	ca, cz, cr := NewCooldowns(ahead, nil), NewCooldowns(behind, nil), NewCooldowns(right, nil)
	ca.now = func() time.Time { return time.Now().Add(time.Hour) }
	cz.now = func() time.Time { return time.Now().Add(-time.Hour) }

	ca.Start("p/ahead", ca.now().Add(30*time.Second), "rate_limit")
	cz.Start("p/behind", cz.now().Add(30*time.Second), "rate_limit")
	drain(t, ahead)
	drain(t, behind)
	require.NoError(t, cr.refresh(t.Context()))
	drain(t, right) // any deletion the refresh queued

	for _, key := range []string{"p/ahead", "p/behind"} {
		left := time.Until(cr.Until(key))
		require.Greater(t, left, 25*time.Second, key)
		require.LessOrEqual(t, left, 31*time.Second, key)
	}

	// Redis itself holds the cooldowns, not a value some instance's clock
	// will misread: each ends by Redis's clock about 30 s from now.
	raw := redis.NewClient(&redis.Options{Addr: srv.Addr, DisableIdentity: true})
	defer raw.Close()
	require.Equal(t, int64(2), raw.HLen(t.Context(), "voiced:cooldowns").Val())
}
