package fleet

import (
	"context"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/fleet/redistest"
)

// manual is a Redis connection whose queued writes the test runs itself
// (drain), in the order it chooses, with no Run loop.
func manual(t *testing.T, srv *redistest.Server) *Redis {
	t.Helper()
	r, err := New(Config{URL: srv.URL(), Budget: time.Second}, slog.New(slog.DiscardHandler), nil)
	require.NoError(t, err)
	t.Cleanup(func() { r.client.Close() })
	r.up.Store(true)
	return r
}

// drain runs r's queued writes.
func drain(t *testing.T, r *Redis) {
	t.Helper()
	for len(r.queue) > 0 {
		r.write(t.Context(), <-r.queue)
	}
}

// TestCooldownsOnlyExtend: instances write the shared hash in any order;
// a shorter cooldown never replaces a longer one, and an ended cooldown
// is forgotten by the read that finds it ended, while one started since
// stands.
func TestCooldownsOnlyExtend(t *testing.T) {
	srv := redistest.Start(t)
	raw := redis.NewClient(&redis.Options{Addr: srv.Addr, DisableIdentity: true})
	defer raw.Close()
	ctx := context.Background()
	const key = "openai/gpt-4o-mini"
	// left is how long the hash's cooldown has to run, by Redis's clock.
	left := func() time.Duration {
		v, err := raw.HGet(ctx, "voiced:cooldowns", key).Result()
		require.NoError(t, err)
		end, err := strconv.ParseInt(v, 10, 64)
		require.NoError(t, err)
		now, err := raw.Time(ctx).Result()
		require.NoError(t, err)
		return time.UnixMilli(end).Sub(now)
	}

	a, b := manual(t, srv), manual(t, srv)
	ca, cb := NewCooldowns(a, nil), NewCooldowns(b, nil)
	ca.Start(key, time.Now().Add(30*time.Second), "quota")
	drain(t, a)
	cb.Start(key, time.Now().Add(time.Second), "rate_limit")
	drain(t, b)
	require.Greater(t, left(), 25*time.Second, "the 30 s quota cooldown stands")

	ended := strconv.FormatInt(time.Now().Add(-time.Second).UnixMilli(), 10)
	require.NoError(t, raw.HSet(ctx, "voiced:cooldowns", key, ended).Err())
	require.NoError(t, ca.refresh(ctx))
	require.False(t, raw.HExists(ctx, "voiced:cooldowns", key).Val(), "an ended cooldown is forgotten")
	cb.Start(key, time.Now().Add(20*time.Second), "rate_limit")
	drain(t, b)
	require.NoError(t, ca.refresh(ctx))
	require.Greater(t, left(), 15*time.Second, "the cooldown started since is kept")
	require.True(t, ca.Until(key).After(time.Now().Add(15*time.Second)))
}
