package fleet

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/fleet/redistest"
	"github.com/voiced/voiced/internal/stages/llm"
)

// TestSpentCountsQueuedAdditions: this instance's addition is still in
// the write-behind queue (a slow Redis holds a backlog of writes, a
// budget each), while another instance's is in Redis. The day's total is
// both: Spent read max(Redis's, this instance's own), the larger of the
// two, so a cap read 2 where 3 were spent, for as long as the write
// waited in the queue.
func TestSpentCountsQueuedAdditions(t *testing.T) {
	srv := redistest.Start(t)
	a, b := manual(t, srv), manual(t, srv)
	sa, sb := NewSpend(a, 0), NewSpend(b, 0)
	const day = "2026-12-01"
	ctx := t.Context()

	require.NoError(t, sb.AddSpend(ctx, llm.SpendKey{Conversation: "x", Day: day}, 2.0))
	drain(t, b)                                                                          // in Redis
	require.NoError(t, sa.AddSpend(ctx, llm.SpendKey{Conversation: "x", Day: day}, 1.0)) // queued

	conv, d, err := sa.Spent(ctx, llm.SpendKey{Conversation: "x", Day: day})
	require.NoError(t, err)
	require.InDelta(t, 3.0, d, 1e-9, "the day's total while this instance's write is queued")
	require.InDelta(t, 3.0, conv, 1e-9, "the conversation's")

	drain(t, a) // the write lands: counted once
	conv, d, err = sa.Spent(ctx, llm.SpendKey{Conversation: "x", Day: day})
	require.NoError(t, err)
	require.InDelta(t, 3.0, d, 1e-9)
	require.InDelta(t, 3.0, conv, 1e-9)

	// A queued write that Redis does not take is kept for resend, and
	// counted once meanwhile.
	require.NoError(t, sa.AddSpend(ctx, llm.SpendKey{Conversation: "x", Day: day}, 1.0))
	a.up.Store(false) // Redis lost before the write ran
	drain(t, a)
	a.up.Store(true)
	_, d, err = sa.Spent(ctx, llm.SpendKey{Conversation: "x", Day: day})
	require.NoError(t, err)
	require.InDelta(t, 4.0, d, 1e-9, "kept for resend")
	upkeep(t, a)
	_, d, err = sa.Spent(ctx, llm.SpendKey{Conversation: "x", Day: day})
	require.NoError(t, err)
	require.InDelta(t, 4.0, d, 1e-9)
}
