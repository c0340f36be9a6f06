package llm

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/stages/llm/llmtest"
)

// generateFor is generateIn for a request answered for tenant.
func (f *fixture) generateFor(t *testing.T, conversation, tenant string) outcome {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 1500*time.Millisecond)
	defer cancel()
	req := helpReq
	req.ConversationID, req.Tenant = conversation, tenant
	var b strings.Builder
	var o outcome
	o.gen, o.err = f.chain.Generate(ctx, req, func(p string) { b.WriteString(p) })
	o.text = b.String()
	return o
}

// TestCostCapPerTenant: once a tenant's spend today reaches
// -llm.max-cost-per-tenant-day, its answers skip the paid provider in any
// conversation (degraded cost_cap, scope tenant), while another tenant,
// and a request without one, still pay.
func TestCostCapPerTenant(t *testing.T) {
	cfg := testConfig()
	cfg.Prices = Prices{"openai-model": {Input: 1, Output: 2}} // 0.0014 USD a request below
	cfg.MaxCostPerTenantDay = 0.001
	ledger := NewMemoryLedger(0)
	cfg.Ledger = ledger
	f := newFixture(t, cfg, link{"openai", []llmtest.Reply{usageReply("openai", llmtest.Usage{Input: 1000, Output: 200})}})

	for _, tc := range []struct {
		conv, tenant string
		wantProv     string
		wantDegr     []string
	}{
		{"a", "t1", "openai", nil},
		{"b", "t1", "extractive", []string{ReasonCostCap, ReasonExtractiveFallback}}, // another conversation, same tenant
		{"c", "t2", "openai", nil},
		{"d", "", "openai", nil}, // no tenant: not capped by it
	} {
		o := f.generateFor(t, tc.conv, tc.tenant)
		require.NoError(t, o.err, tc.conv)
		require.Equal(t, tc.wantProv, o.gen.Provider, tc.conv)
		require.Equal(t, tc.wantDegr, o.gen.Degradation, tc.conv)
		require.NotEmpty(t, o.text, tc.conv)
	}
	require.Len(t, f.servers["openai"].Requests(), 3)
	require.InDelta(t, 1, testutil.ToFloat64(f.chain.m.capped.WithLabelValues("tenant")), 0)
	require.InDelta(t, 0, testutil.ToFloat64(f.chain.m.capped.WithLabelValues("day")), 0)
	tot, err := ledger.Totals(t.Context(), f.chain.spendKey("x", "t1"))
	require.NoError(t, err)
	require.InDelta(t, 0.0014, tot.TenantDay, 1e-12)
	require.InDelta(t, 0.0014*3, tot.Day, 1e-12, "every tenant's spend is the day's too")
}

// A cap per tenant with a ledger that keeps no tenant totals would cap
// nothing: refused.
func TestCostCapPerTenantNeedsTenantLedger(t *testing.T) {
	cfg := testConfig()
	cfg.MaxCostPerTenantDay = 1
	cfg.Ledger = failingLedger{}
	_, err := newChain(cfg, testTemplater{}, nil, nil, nil)
	require.ErrorContains(t, err, "needs a ledger that counts tenants")
}

// TestMemoryLedgerTenantDays: a tenant's total is per UTC day, apart from
// other tenants', and forgotten with its day.
func TestMemoryLedgerTenantDays(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	l := NewMemoryLedger(0)
	l.now = func() time.Time { return now }
	ctx := t.Context()
	day1 := dayKey(now)
	require.NoError(t, l.AddSpend(ctx, SpendKey{Conversation: "a", Day: day1, Tenant: "t1"}, 1))
	require.NoError(t, l.AddSpend(ctx, SpendKey{Conversation: "b", Day: day1, Tenant: "t1"}, 2))
	require.NoError(t, l.AddSpend(ctx, SpendKey{Conversation: "c", Day: day1, Tenant: "t2"}, 4))
	require.NoError(t, l.AddSpend(ctx, SpendKey{Conversation: "d", Day: day1}, 8))
	tot, err := l.Totals(ctx, SpendKey{Conversation: "a", Day: day1, Tenant: "t1"})
	require.NoError(t, err)
	require.Equal(t, SpendTotals{Conversation: 1, Day: 15, TenantDay: 3}, tot)
	tot, _ = l.Totals(ctx, SpendKey{Day: day1})
	require.Zero(t, tot.TenantDay, "no tenant, no tenant total")

	now = now.Add(24 * time.Hour)
	day2 := dayKey(now)
	require.NoError(t, l.AddSpend(ctx, SpendKey{Day: day2, Tenant: "t1"}, 16))
	tot, _ = l.Totals(ctx, SpendKey{Day: day2, Tenant: "t1"})
	require.InDelta(t, 16, tot.TenantDay, 0, "a new day starts from nothing")
	tot, _ = l.Totals(ctx, SpendKey{Day: day1, Tenant: "t1"})
	require.InDelta(t, 3, tot.TenantDay, 0, "yesterday kept")

	now = now.Add(24 * time.Hour)
	require.NoError(t, l.AddSpend(ctx, SpendKey{Day: dayKey(now), Tenant: "t2"}, 1))
	tot, _ = l.Totals(ctx, SpendKey{Day: day1, Tenant: "t1"})
	require.Zero(t, tot.TenantDay, "two days ago forgotten")
	require.Len(t, l.tenantDays, 2)
}
