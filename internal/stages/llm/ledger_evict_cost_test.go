package llm

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestMemoryLedgerMakesRoomWithoutWalkingAll: making room in a full
// ledger happens under the mutex every answer's cost check takes (and
// SpendTimeout cannot bound a wait for it: the in-process ledger ignores
// its context). Copying and sorting every conversation to find the 1%
// that spent least recently held it for tens of milliseconds at
// MaxLedgerConversations (74 ms measured beside two CPU hogs, 320 ms
// under -race) every 1% of new conversations. Making room must cost what
// it forgets, not what the ledger holds: measured here by the memory one
// evicting AddSpend allocates, which copying every entry makes
// proportional to the ledger's size.
func TestMemoryLedgerMakesRoomWithoutWalkingAll(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	l := NewMemoryLedger(0)
	l.now = func() time.Time { return now }
	l.maxConvs = 20_000
	for i := range l.maxConvs {
		now = now.Add(time.Millisecond)
		require.NoError(t, l.AddSpend(ctx, SpendKey{Conversation: fmt.Sprintf("conv-%08d", i)}, 0.001))
	}
	// Spent recently: the 1% that spent least recently go, not it.
	require.NoError(t, l.AddSpend(ctx, SpendKey{Conversation: "conv-00000000"}, 0.001))
	key := SpendKey{Conversation: "new"}
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	start := time.Now()
	require.NoError(t, l.AddSpend(ctx, key, 0.001))
	took := time.Since(start)
	runtime.ReadMemStats(&after)
	allocated := after.TotalAlloc - before.TotalAlloc
	t.Logf("making room among %d conversations: %v, %d bytes allocated", l.maxConvs, took, allocated)
	l.mu.Lock()
	held := len(l.convs)
	l.mu.Unlock()
	require.Equal(t, l.maxConvs-l.maxConvs/100+1, held)
	require.Less(t, allocated, uint64(64<<10), "making room copied the whole ledger")

	conv, _, err := l.Spent(ctx, SpendKey{Conversation: "conv-00000000"})
	require.NoError(t, err)
	require.InDelta(t, 0.002, conv, 1e-12, "the conversation that spent again is kept")
	conv, _, err = l.Spent(ctx, SpendKey{Conversation: "conv-00000001"})
	require.NoError(t, err)
	require.Zero(t, conv, "the least recent is forgotten")
}
