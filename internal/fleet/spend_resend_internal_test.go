package fleet

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/fleet/redistest"
	"github.com/voiced/voiced/internal/stages/llm"
)

// runSlowRedis starts a Redis behind a proxy (its delay settable) and Run
// on it; Poll as given.
func runSlowRedis(t *testing.T, poll time.Duration) (*Redis, *redistest.Server, func(time.Duration)) {
	t.Helper()
	srv := redistest.Start(t)
	p := srv.Proxy(t)
	r, err := New(Config{URL: "redis://" + p.Addr + "/0", Budget: 200 * time.Millisecond, Poll: poll}, slog.New(slog.DiscardHandler), nil)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { r.Run(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })
	require.Eventually(t, r.Up, 20*time.Second, time.Millisecond)
	return r, srv, p.SetDelay
}

// TestSpendResendNeverUndercounts: this instance spent 1.0 today while
// Redis was away (kept unsent), and another instance 2.0 (in Redis). While
// resend sends the kept additions again, a cap must keep reading 3.0.
// resend empties the unsent maps before it sends them, one Redis call
// each, conversations first and the day last: until the day's call is
// made, Spent reads Redis's 2.0, no unsent, and this instance's own 1.0,
// so 2.0: the cap forgets the outage's spend for the whole resend.
func TestSpendResendNeverUndercounts(t *testing.T) {
	r, srv, delay := runSlowRedis(t, time.Hour) // upkeep run by hand
	s := NewSpend(r, 0)
	ctx := context.Background()
	const day = "2026-12-01"
	for i := range 200 {
		k := llm.SpendKey{Conversation: fmt.Sprintf("c%d", i), Day: day}
		s.local.AddSpend(ctx, k, 1.0/200)
		s.keep(k, 1.0/200)
	}
	raw := redis.NewClient(&redis.Options{Addr: srv.Addr, DisableIdentity: true})
	defer raw.Close()
	require.NoError(t, raw.IncrByFloat(ctx, "voiced:spend:day:"+day, 2.0).Err())
	_, d, _ := s.Spent(ctx, llm.SpendKey{Day: day})
	require.InDelta(t, 3.0, d, 1e-9, "before the resend")

	delay(3 * time.Millisecond) // a Redis a network hop away
	done := make(chan struct{})
	go func() { defer close(done); s.resend(ctx) }()
	low := d
	for running := true; running; {
		select {
		case <-done:
			running = false
		default:
		}
		if _, d, err := s.Spent(ctx, llm.SpendKey{Day: day}); err == nil {
			low = min(low, d)
		}
	}
	_, d, _ = s.Spent(ctx, llm.SpendKey{Day: day})
	require.InDelta(t, 3.0, d, 1e-9, "after the resend")
	require.InDelta(t, 3.0, low, 1e-9, "the day's total read while resend ran")
}

// TestSpendResendBatched: resend runs on Run's goroutine after a check.
// It sent every kept addition (up to maxUnsent conversations), one Redis
// call each, in one go: after a long outage that held the health checks,
// the cooldowns' refresh and the registry's publish for N round trips.
// One resend now sends the days' totals and at most resendBatch
// conversations (resaveDirty is bounded for the same reason).
func TestSpendResendBatched(t *testing.T) {
	r, _, _ := runSlowRedis(t, time.Hour) // upkeep run by hand
	s := NewSpend(r, 0)
	for i := range 1000 {
		s.keep(llm.SpendKey{Conversation: fmt.Sprintf("c%d", i), Day: "2026-12-01"}, 0.001)
	}
	s.resend(context.Background())
	s.mu.Lock()
	defer s.mu.Unlock()
	require.Empty(t, s.unsentDay, "the day's total goes first")
	require.Len(t, s.unsentConv, 1000-resendBatch, "one resend sends at most resendBatch conversations")
}
