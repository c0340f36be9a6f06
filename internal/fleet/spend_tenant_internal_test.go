package fleet

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/fleet/redistest"
	"github.com/voiced/voiced/internal/stages/llm"
)

// TestSpendTenantDays: a tenant's day is counted across the fleet like
// the day, read in the same call (one MGET) with the conversation's and
// the day's, queued additions included; an addition Redis did not take
// is resent once Redis answers, to the tenant's day and to the day each
// once.
func TestSpendTenantDays(t *testing.T) {
	srv := redistest.Start(t)
	a, b := manual(t, srv), manual(t, srv)
	sa, sb := NewSpend(a, 0), NewSpend(b, 0)
	const day = "2026-12-01"
	ctx := t.Context()
	t1 := llm.SpendKey{Day: day, Tenant: "t1"}

	require.NoError(t, sb.AddSpend(ctx, llm.SpendKey{Conversation: "x", Day: day, Tenant: "t1"}, 2.0))
	drain(t, b)                                                                                        // in Redis
	require.NoError(t, sa.AddSpend(ctx, llm.SpendKey{Conversation: "y", Day: day, Tenant: "t1"}, 1.0)) // queued
	require.NoError(t, sa.AddSpend(ctx, llm.SpendKey{Conversation: "z", Day: day, Tenant: "t2"}, 0.5)) // queued

	tot, err := sa.Totals(ctx, t1)
	require.NoError(t, err)
	require.Equal(t, llm.SpendTotals{Day: 3.5, TenantDay: 3}, tot, "Redis's and this instance's queued")
	tot, err = sa.Totals(ctx, llm.SpendKey{Day: day, Tenant: "t2"})
	require.NoError(t, err)
	require.InDelta(t, 0.5, tot.TenantDay, 1e-9)
	tot, err = sb.Totals(ctx, llm.SpendKey{Day: day, Tenant: "t2"})
	require.NoError(t, err)
	require.Zero(t, tot.TenantDay, "not in Redis yet")

	drain(t, a)
	tot, err = sb.Totals(ctx, t1)
	require.NoError(t, err)
	require.Equal(t, llm.SpendTotals{Day: 3.5, TenantDay: 3}, tot, "another instance's, through Redis")

	// Lost, then resent: counted once meanwhile and once after.
	require.NoError(t, sa.AddSpend(ctx, llm.SpendKey{Conversation: "y", Day: day, Tenant: "t1"}, 1.0))
	a.up.Store(false) // Redis lost before the write ran
	drain(t, a)
	a.up.Store(true)
	tot, err = sa.Totals(ctx, t1)
	require.NoError(t, err)
	require.Equal(t, llm.SpendTotals{Day: 4.5, TenantDay: 4}, tot, "kept for resend")
	tot, _ = sb.Totals(ctx, t1)
	require.InDelta(t, 3, tot.TenantDay, 1e-9, "not in Redis")
	upkeep(t, a)
	tot, err = sb.Totals(ctx, t1)
	require.NoError(t, err)
	require.Equal(t, llm.SpendTotals{Day: 4.5, TenantDay: 4}, tot, "resent, each total once")
	tot, err = sa.Totals(ctx, t1)
	require.NoError(t, err)
	require.Equal(t, llm.SpendTotals{Day: 4.5, TenantDay: 4}, tot)
	require.Empty(t, sa.unsentTenant)
	require.Empty(t, sa.unsentDay)

	// While Redis cannot answer, this instance's own count.
	srv.Stop()
	tot, err = sa.Totals(ctx, t1)
	require.NoError(t, err)
	require.Equal(t, llm.SpendTotals{Day: 2.5, TenantDay: 2}, tot)
}
