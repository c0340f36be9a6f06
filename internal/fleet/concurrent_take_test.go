package fleet_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/fleet"
	"github.com/voiced/voiced/internal/fleet/redistest"
)

// TestConcurrentTakesGiveTerminalOnce: two takes of one conversation's
// missed terminals overlap (a resumed session's attach and an old
// session's flush that finds it live, or two resumes on two instances).
// Redis is healthy throughout. Both read the list before either removes
// it; each gives only what its own removal popped, so the terminal is
// given once (the first version of the read-then-remove take gave it
// twice).
//
// Interleaving without sleeps: CLIENT PAUSE WRITE lets reads through and
// holds writes and scripts, so both takes read, then both wait to remove.
func TestConcurrentTakesGiveTerminalOnce(t *testing.T) {
	srv := redistest.Start(t)
	cfg := fleet.Config{URL: srv.URL(), Poll: time.Hour, Budget: 50 * time.Millisecond, ResumeBudget: 10 * time.Second}
	a, b := newInstanceConfig(t, cfg), newInstanceConfig(t, cfg)
	ca, cb := fleet.NewConversations(a.r, time.Minute), fleet.NewConversations(b.r, time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	raw := redis.NewClient(&redis.Options{Addr: srv.Addr, DisableIdentity: true})
	defer raw.Close()

	term := []byte(`{"type":"result","requestId":"r1","answer":"Your order ships today."}`)
	ca.AddMissed("c", term)
	require.Eventually(t, func() bool { return raw.LLen(ctx, "voiced:kept:c").Val() == 1 }, testTimeout, time.Millisecond)

	require.NoError(t, raw.Do(ctx, "CLIENT", "PAUSE", 15000, "WRITE").Err())
	paused := true
	unpause := func() {
		if paused {
			paused = false
			require.NoError(t, raw.Do(ctx, "CLIENT", "UNPAUSE").Err())
		}
	}
	defer unpause()

	var wg sync.WaitGroup
	got := make([][][]byte, 2)
	for i, c := range []*fleet.Conversations{ca, cb} {
		wg.Go(func() {
			got[i], _ = c.TakeMissed(ctx, "c")
		})
	}
	// Both takes have read and wait to remove (their scripts are held).
	require.Eventually(t, func() bool { return heldByPause(ctx, raw) >= 2 }, testTimeout, time.Millisecond)
	unpause()
	wg.Wait()

	require.Equal(t, 1, len(got[0])+len(got[1]),
		"one terminal kept, given %d times (take A %q, take B %q)", len(got[0])+len(got[1]), got[0], got[1])
}

// heldByPause counts the clients whose command CLIENT PAUSE holds
// (flags b): a script, or the EXEC of a transaction that writes.
func heldByPause(ctx context.Context, raw *redis.Client) int {
	list, err := raw.ClientList(ctx).Result()
	if err != nil {
		return 0
	}
	n := 0
	for _, line := range strings.Split(list, "\n") {
		for _, f := range strings.Fields(line) {
			if v, ok := strings.CutPrefix(f, "flags="); ok && strings.Contains(v, "b") {
				n++
			}
		}
	}
	return n
}
