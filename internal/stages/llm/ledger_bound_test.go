package llm

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestMemoryLedgerBoundedByCount: the in-process ledger forgets a
// conversation only a day after its last spend, so under a steady churn
// of short conversations (every session is a new one) it held every
// conversation of the last 24 hours, however many: 150,000 conversations
// in two hours stayed 150,000 entries (here scaled down a hundredfold). Like MemoryConversations, it holds
// at most MaxLedgerConversations, the least recently spending giving way.
func TestMemoryLedgerBoundedByCount(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	l := NewMemoryLedger(0)
	l.now = func() time.Time { return now }
	l.maxConvs = MaxLedgerConversations / 100 // the same rule, faster
	n := 3 * l.maxConvs / 2
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := range n {
		now = now.Add(2 * time.Hour / time.Duration(n))
		require.NoError(t, l.AddSpend(ctx, SpendKey{Conversation: fmt.Sprintf("conv-%08d", i), Day: dayKey(now)}, 0.001))
	}
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	l.mu.Lock()
	held := len(l.convs)
	l.mu.Unlock()
	t.Logf("%d conversations held, heap %+d KiB", held, (int64(after.HeapAlloc)-int64(before.HeapAlloc))>>10)
	require.LessOrEqual(t, held, l.maxConvs, "conversations the ledger holds")

	// The most recent conversations are still counted.
	conv, _, err := l.Spent(ctx, SpendKey{Conversation: fmt.Sprintf("conv-%08d", n-1), Day: dayKey(now)})
	require.NoError(t, err)
	require.InDelta(t, 0.001, conv, 1e-12)
}
