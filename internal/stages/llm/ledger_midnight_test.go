package llm

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestLateSpendForYesterdayKeepsToday: a request keyed to the day it
// started (Chain.spendKey) may add its cost after midnight. If that is the
// first spend ever recorded for that day, AddSpend takes it for "a new day"
// and deletes every other total, including today's, so the day cap
// restarts from zero.
func TestLateSpendForYesterdayKeepsToday(t *testing.T) {
	midnight := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	now := midnight.Add(time.Second)
	l := NewMemoryLedger(0)
	l.now = func() time.Time { return now }
	ctx := t.Context()
	today := SpendKey{Conversation: "b", Day: dayKey(now)}
	require.NoError(t, l.AddSpend(ctx, today, 3))
	// Started at 23:59:59.9, yesterday; its cost arrives now.
	late := SpendKey{Conversation: "a", Day: dayKey(midnight.Add(-100 * time.Millisecond))}
	require.NoError(t, l.AddSpend(ctx, late, 1))
	_, day, err := l.Spent(ctx, SpendKey{Day: dayKey(now)})
	require.NoError(t, err)
	require.InDelta(t, 3, day, 0, "today's total wiped by a late spend for yesterday")
}
