package llm

import (
	"math"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/stages/llm/llmtest"
)

// TestCostCapSkipsModelPricedByAnsweredName: the price table is looked
// up by the configured model, then by the model the provider says
// answered ("gpt-4o-mini" answered as "gpt-4o-mini-2024-07-18"). Spend
// priced through the answered name counts towards the caps, so once a cap
// is reached that provider must be skipped like any other paid one;
// otherwise the cap never stops the spending it measures.
func TestCostCapSkipsModelPricedByAnsweredName(t *testing.T) {
	cfg := testConfig()
	// The fake answers as "openai-model-2024"; the configured model is
	// "openai-model", which is not in the table.
	cfg.Prices = Prices{"openai-model-2024": {Input: 1, Output: 2}}
	cfg.MaxCostPerConversation = 0.001
	ledger := NewMemoryLedger(0)
	cfg.Ledger = ledger
	f := newFixture(t, cfg, link{"openai", []llmtest.Reply{usageReply("openai", llmtest.Usage{Input: 1000, Output: 200})}})

	first := f.generateIn(t, "a")
	require.NoError(t, first.err)
	require.Equal(t, "openai", first.gen.Provider)
	conv, _, err := ledger.Spent(t.Context(), f.chain.spendKey("a", ""))
	require.NoError(t, err)
	require.InDelta(t, 0.0014, conv, 1e-12, "the first answer's spend is counted (priced by the answered model)")

	second := f.generateIn(t, "a")
	require.NoError(t, second.err)
	require.Equal(t, "extractive", second.gen.Provider, "conversation cap (0.001) reached at 0.0014 USD, yet the paid provider answered again")
	require.Equal(t, []string{ReasonCostCap, ReasonExtractiveFallback}, second.gen.Degradation)
	require.Len(t, f.servers["openai"].Requests(), 1)
	require.InDelta(t, 1, testutil.ToFloat64(f.chain.m.capped.WithLabelValues("conversation")), 0)
}

// TestNaNPriceRefused: a NaN price in Config.Prices (LoadPrices refuses
// one, Validate does not) makes every priced attempt add NaN to the
// ledger; NaN >= cap is false, so the cap never triggers again.
func TestNaNPriceRefused(t *testing.T) {
	cfg := Config{Prices: Prices{"gpt-4o-mini": {Input: math.NaN(), Output: 0.6}}, MaxCostPerConversation: 0.001}
	require.Error(t, cfg.Validate(), "a NaN price must be refused like LoadPrices refuses it")
}

// TestNaNPriceDoesNotPoisonTheCap: even past Validate (newChain), an
// attempt whose cost is not a number adds nothing, so the totals stay
// comparable with the caps.
func TestNaNPriceDoesNotPoisonTheCap(t *testing.T) {
	cfg := testConfig()
	cfg.Prices = Prices{"openai-model": {Input: math.NaN(), Output: 2}}
	cfg.MaxCostPerConversation = 0.001
	ledger := NewMemoryLedger(0)
	cfg.Ledger = ledger
	f := newFixture(t, cfg, link{"openai", []llmtest.Reply{usageReply("openai", llmtest.Usage{Input: 1000, Output: 200})}})
	require.NoError(t, f.generateIn(t, "a").err)
	conv, day, err := ledger.Spent(t.Context(), f.chain.spendKey("a", ""))
	require.NoError(t, err)
	require.False(t, math.IsNaN(conv) || math.IsNaN(day), "ledger totals poisoned with NaN: conv=%v day=%v", conv, day)
}
