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
// read by one instance is not deleted once another has started a new one.
func TestCooldownsOnlyExtend(t *testing.T) {
	srv := redistest.Start(t)
	raw := redis.NewClient(&redis.Options{Addr: srv.Addr, DisableIdentity: true})
	defer raw.Close()
	ctx := context.Background()
	const key = "openai/gpt-4o-mini"
	hash := func() string {
		v, err := raw.HGet(ctx, "voiced:cooldowns", key).Result()
		require.NoError(t, err)
		return v
	}

	a, b := manual(t, srv), manual(t, srv)
	ca, cb := NewCooldowns(a, nil), NewCooldowns(b, nil)
	long := time.Now().Add(30 * time.Second)
	ca.Start(key, long, "quota")
	drain(t, a)
	cb.Start(key, time.Now().Add(time.Second), "rate_limit")
	drain(t, b)
	require.Equal(t, strconv.FormatInt(long.UnixMilli(), 10), hash(), "the 30 s quota cooldown stands")

	ended := strconv.FormatInt(time.Now().Add(-time.Second).UnixMilli(), 10)
	require.NoError(t, raw.HSet(ctx, "voiced:cooldowns", key, ended).Err())
	require.NoError(t, ca.refresh(ctx)) // reads the ended one, queues its deletion
	renewed := time.Now().Add(20 * time.Second)
	cb.Start(key, renewed, "rate_limit")
	drain(t, b)
	drain(t, a)
	require.Equal(t, strconv.FormatInt(renewed.UnixMilli(), 10), hash(), "the cooldown started since is kept")

	require.NoError(t, raw.HSet(ctx, "voiced:cooldowns", key, ended).Err())
	require.NoError(t, ca.refresh(ctx))
	drain(t, a)
	require.False(t, raw.HExists(ctx, "voiced:cooldowns", key).Val(), "an ended cooldown is forgotten")
}
