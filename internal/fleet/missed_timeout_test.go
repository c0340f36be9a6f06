package fleet_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/fleet"
	"github.com/voiced/voiced/internal/fleet/redistest"
)

// A Redis that answers a call after its budget (here: frozen for a
// moment, still taken for up) has still run it. Missed terminals were
// neither written idempotently nor read before being deleted, so such a
// call broke "exactly once".

// TestMissedWriteTimedOutIsKeptTwice: the write of a missed terminal times
// out, so the terminal is kept here (fallback); Redis then runs the write
// it had received. The next take returned the terminal twice.
func TestMissedWriteTimedOutIsKeptTwice(t *testing.T) {
	srv, in, conv, raw, ctx := slowRedis(t)

	// A connection in the pool, as on any instance that has been up.
	conv.AddMissed("warm", []byte("x"))
	require.Eventually(t, func() bool { return raw.LLen(ctx, "voiced:kept:warm").Val() == 1 }, testTimeout, time.Millisecond)

	srv.Freeze()
	conv.AddMissed("c", []byte("result r1"))
	// The write-behind gives up after its budget and keeps it here.
	require.Eventually(t, func() bool { return skipped(in, "add_missed") >= 1 }, testTimeout, time.Millisecond)
	srv.Thaw()
	// Redis runs the RPUSH it had received before the client gave up. On a
	// loaded machine the client may give up before it even sent it: the
	// test then writes it, as the late write would have (never waiting
	// for a write that may not come).
	if raw.LLen(ctx, "voiced:kept:c").Val() == 0 {
		require.NoError(t, raw.RPush(ctx, "voiced:kept:c", strconv.FormatInt(time.Now().UnixMilli(), 10)+" result r1").Err())
	}

	got, err := conv.TakeMissed(ctx, "c")
	require.NoError(t, err)
	require.Len(t, got, 1, "one terminal kept, taken %d times: %q", len(got), got)
}

// TestMissedTakeTimedOutKeepsThem: a resume's take times out and returns
// nothing. It used to read and delete in one call, which Redis then ran:
// no later resume ever got the terminals. Now only a read that came back
// removes them.
func TestMissedTakeTimedOutKeepsThem(t *testing.T) {
	srv, _, conv, raw, ctx := slowRedis(t)

	conv.AddMissed("c", []byte("result r1"))
	require.Eventually(t, func() bool { return raw.LLen(ctx, "voiced:kept:c").Val() == 1 }, testTimeout, time.Millisecond)

	srv.Freeze()
	got, err := conv.TakeMissed(ctx, "c") // a resume while Redis is slow
	require.Error(t, err)
	require.Empty(t, got)
	srv.Thaw()
	// The read Redis runs late removes nothing.
	require.Equal(t, int64(1), raw.LLen(ctx, "voiced:kept:c").Val())

	got, err = conv.TakeMissed(ctx, "c") // the next resume
	require.NoError(t, err)
	require.Len(t, got, 1, "the terminal the first take gave up on is gone")
	require.Zero(t, raw.Exists(ctx, "voiced:kept:c").Val(), "taken once read")
}

// slowRedis starts a Redis for a test that freezes it, an instance whose
// calls have a 50 ms budget, and a raw client to look inside. Poll is an
// hour: Redis stays "up" for the whole test, as it does for the three
// checks a slow Redis takes to be declared lost.
func slowRedis(t *testing.T) (*redistest.Server, *instance, *fleet.Conversations, *redis.Client, context.Context) {
	t.Helper()
	srv := redistest.Start(t)
	in := newInstanceConfig(t, fleet.Config{URL: srv.URL(), Poll: time.Hour, Budget: 50 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	raw := redis.NewClient(&redis.Options{Addr: srv.Addr, DisableIdentity: true})
	t.Cleanup(func() { raw.Close() })
	return srv, in, fleet.NewConversations(in.r, time.Minute), raw, ctx
}

// skipped is voiced_redis_skipped_total{op}, 0 before its first count.
func skipped(in *instance, op string) float64 {
	mfs, _ := in.reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() != "voiced_redis_skipped_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if hasLabels(m.GetLabel(), []string{"op", op}) {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}
