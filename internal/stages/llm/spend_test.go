package llm

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/stages/llm/llmtest"
)

// usageReply answers in name's own wire format with the given usage.
func usageReply(name string, u llmtest.Usage) llmtest.Reply {
	pieces := []string{"Open Settings, ", "then Security."}
	switch name {
	case "anthropic":
		return llmtest.Stream(llmtest.AnthropicEventsUsage("anthropic-model-20250101", "end_turn", u, pieces...), llmtest.StreamOpts{})
	case "gemini":
		return llmtest.Stream(llmtest.GeminiChunksUsage("gemini-model-001", "STOP", true, false, u, pieces...), llmtest.StreamOpts{})
	}
	return llmtest.Stream(llmtest.OpenAIChunksUsage(name+"-model-2024", "stop", u, pieces...), llmtest.StreamOpts{})
}

// TestTokensAndCostFromUsage checks that each provider's own usage
// fields become voiced_llm_tokens_total and, through the price table,
// voiced_llm_cost_usd_total, and reach the ledger.
func TestTokensAndCostFromUsage(t *testing.T) {
	prices := Prices{"openai-model": {Input: 0.15, Output: 0.60}, "anthropic-model": {Input: 1, Output: 5}, "gemini-model": {Input: 0.30, Output: 2.50}}
	for _, tc := range []struct {
		name    string
		usage   llmtest.Usage
		in, out float64
		usd     float64
	}{
		{"openai", llmtest.Usage{Input: 1200, Output: 40}, 1200, 40, (1200*0.15 + 40*0.60) / 1e6},
		{"anthropic", llmtest.Usage{Input: 2048, Output: 77}, 2048, 77, (2048*1 + 77*5) / 1e6},
		{"gemini", llmtest.Usage{Input: 300, Output: 40, Thoughts: 100}, 300, 140, (300*0.30 + 140*2.50) / 1e6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig()
			cfg.Prices = prices
			ledger := NewMemoryLedger(0)
			cfg.Ledger = ledger
			f := newFixture(t, cfg, link{tc.name, []llmtest.Reply{usageReply(tc.name, tc.usage)}})
			o := f.generateIn(t, "conv-1")
			require.NoError(t, o.err)
			require.Equal(t, tc.name, o.gen.Provider)
			model := tc.name + "-model"
			require.InDelta(t, tc.in, testutil.ToFloat64(f.chain.m.tokens.WithLabelValues(tc.name, model, "input")), 0)
			require.InDelta(t, tc.out, testutil.ToFloat64(f.chain.m.tokens.WithLabelValues(tc.name, model, "output")), 0)
			require.InDelta(t, tc.usd, testutil.ToFloat64(f.chain.m.cost.WithLabelValues(tc.name, model)), 1e-12)
			conv, day, err := ledger.Spent(t.Context(), f.chain.spendKey("conv-1", ""))
			require.NoError(t, err)
			require.InDelta(t, tc.usd, conv, 1e-12)
			require.InDelta(t, tc.usd, day, 1e-12)
		})
	}
}

// failingLedger fails every call.
type failingLedger struct{}

func (failingLedger) AddSpend(context.Context, SpendKey, float64) error {
	return errors.New("ledger down")
}

func (failingLedger) Spent(context.Context, SpendKey) (float64, float64, error) {
	return 0, 0, errors.New("ledger down")
}

// TestCostCaps runs two requests in a row: the first spends 0.0014 USD
// at the paid "openai" (1000 input tokens at 1 USD/M, 200 output at 2),
// the second shows whether a cap stopped the paid provider.
func TestCostCaps(t *testing.T) {
	usage := llmtest.Usage{Input: 1000, Output: 200}
	for _, tc := range []struct {
		name       string
		cfg        func(*Config)
		free       bool   // a free "backup" follows the paid "openai"
		secondConv string // the second request's conversation
		wantProv   string
		wantDegr   []string
		wantCalls  int    // requests the paid provider got
		wantScope  string // voiced_llm_cost_capped_total's label, "" for none
		ledgerErrs float64
	}{
		{name: "no cap", cfg: func(c *Config) {}, secondConv: "a", wantProv: "openai", wantCalls: 2},
		{name: "conversation cap reached", cfg: func(c *Config) { c.MaxCostPerConversation = 0.001 }, secondConv: "a",
			wantProv: "extractive", wantDegr: []string{ReasonCostCap, ReasonExtractiveFallback}, wantCalls: 1, wantScope: "conversation"},
		{name: "conversation cap: another conversation still pays", cfg: func(c *Config) { c.MaxCostPerConversation = 0.001 }, secondConv: "b",
			wantProv: "openai", wantCalls: 2},
		{name: "conversation cap not reached", cfg: func(c *Config) { c.MaxCostPerConversation = 0.002 }, secondConv: "a",
			wantProv: "openai", wantCalls: 2},
		{name: "day cap reached by another conversation", cfg: func(c *Config) { c.MaxCostPerDay = 0.0013 }, secondConv: "b",
			wantProv: "extractive", wantDegr: []string{ReasonCostCap, ReasonExtractiveFallback}, wantCalls: 1, wantScope: "day"},
		{name: "a free provider still answers", cfg: func(c *Config) { c.MaxCostPerDay = 0.001 }, free: true, secondConv: "b",
			wantProv: "backup", wantDegr: []string{ReasonProviderFallback, ReasonCostCap}, wantCalls: 1, wantScope: "day"},
		{name: "unpriced model is never capped", cfg: func(c *Config) { c.MaxCostPerDay = 0.001; c.Prices = nil }, secondConv: "a",
			wantProv: "openai", wantCalls: 2},
		{name: "ledger down: no cap, request served", cfg: func(c *Config) { c.MaxCostPerDay = 0.001; c.Ledger = failingLedger{} }, secondConv: "a",
			wantProv: "openai", wantCalls: 2, ledgerErrs: 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig()
			cfg.Prices = Prices{"openai-model": {Input: 1, Output: 2}}
			tc.cfg(&cfg)
			links := []link{{"openai", []llmtest.Reply{usageReply("openai", usage)}}}
			if tc.free {
				links = append(links, link{"backup", []llmtest.Reply{usageReply("backup", usage)}})
			}
			f := newFixture(t, cfg, links...)
			first := f.generateIn(t, "a")
			require.NoError(t, first.err)
			require.Equal(t, "openai", first.gen.Provider)
			require.Empty(t, first.gen.Degradation)

			second := f.generateIn(t, tc.secondConv)
			require.NoError(t, second.err)
			require.Equal(t, tc.wantProv, second.gen.Provider)
			require.Equal(t, tc.wantDegr, second.gen.Degradation)
			require.NotEmpty(t, second.text)
			require.Len(t, f.servers["openai"].Requests(), tc.wantCalls)
			for _, scope := range []string{"conversation", "day"} {
				want := 0.0
				if scope == tc.wantScope {
					want = 1
				}
				require.InDelta(t, want, testutil.ToFloat64(f.chain.m.capped.WithLabelValues(scope)), 0, scope)
			}
			errs := testutil.ToFloat64(f.chain.m.spendErrors.WithLabelValues("read")) + testutil.ToFloat64(f.chain.m.spendErrors.WithLabelValues("add"))
			require.InDelta(t, tc.ledgerErrs, errs, 0)
		})
	}
}

func (f *fixture) generateIn(t *testing.T, conversation string) outcome {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 1500*time.Millisecond)
	defer cancel()
	req := helpReq
	req.ConversationID = conversation
	var b strings.Builder
	var o outcome
	o.gen, o.err = f.chain.Generate(ctx, req, func(p string) { b.WriteString(p) })
	o.text = b.String()
	return o
}

func TestLoadPrices(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		want       Prices
		wantErr    string
	}{
		{name: "yaml", text: "# USD per million tokens\ngpt-4o-mini: {input: 0.15, output: 0.60}\nclaude-haiku-4-5:\n  input: 1\n  output: 5\n",
			want: Prices{"gpt-4o-mini": {Input: 0.15, Output: 0.60}, "claude-haiku-4-5": {Input: 1, Output: 5}}},
		{name: "json", text: `{"gemini-2.5-flash": {"input": 0.3, "output": 2.5}}`, want: Prices{"gemini-2.5-flash": {Input: 0.3, Output: 2.5}}},
		{name: "empty", text: "", want: nil},
		{name: "unknown field", text: "gpt-4o-mini: {input: 0.15, ouput: 0.6}\n", wantErr: "ouput"},
		{name: "negative", text: "gpt-4o-mini: {input: -1, output: 0.6}\n", wantErr: `model "gpt-4o-mini": input price -1: want a number >= 0`},
		{name: "not a number", text: "gpt-4o-mini: {input: cheap}\n", wantErr: "cheap"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "prices.yaml")
			require.NoError(t, os.WriteFile(path, []byte(tc.text), 0o600))
			got, err := LoadPrices(path)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
	_, err := LoadPrices(filepath.Join(t.TempDir(), "missing.yaml"))
	require.ErrorIs(t, err, os.ErrNotExist)
}

func TestMemoryLedgerForgets(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	l := NewMemoryLedger(0)
	l.now = func() time.Time { return now }
	ctx := t.Context()
	require.NoError(t, l.AddSpend(ctx, SpendKey{Conversation: "a", Day: dayKey(now)}, 1))
	now = now.Add(25 * time.Hour) // the next day, "a" idle for more than a day
	require.NoError(t, l.AddSpend(ctx, SpendKey{Conversation: "b", Day: dayKey(now)}, 2))
	conv, day, _ := l.Spent(ctx, SpendKey{Conversation: "a", Day: "2026-12-01"})
	require.Zero(t, conv, "idle conversation forgotten")
	require.InDelta(t, 1, day, 0, "yesterday kept")
	now = now.Add(24 * time.Hour)
	require.NoError(t, l.AddSpend(ctx, SpendKey{Conversation: "b", Day: dayKey(now)}, 4))
	_, day, _ = l.Spent(ctx, SpendKey{Day: "2026-12-01"})
	require.Zero(t, day, "two days ago forgotten")
	conv, day, _ = l.Spent(ctx, SpendKey{Conversation: "b", Day: dayKey(now)})
	require.InDelta(t, 6, conv, 0)
	require.InDelta(t, 4, day, 0)
}

// A conversation that can be resumed for longer than a day keeps its
// spend for as long: its cost cap must not start again from nothing.
func TestMemoryLedgerKeepsResumableConversations(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	l := NewMemoryLedger(72 * time.Hour)
	l.now = func() time.Time { return now }
	ctx := t.Context()
	require.NoError(t, l.AddSpend(ctx, SpendKey{Conversation: "a"}, 1))
	now = now.Add(30 * time.Hour) // idle for more than a day, resumable still
	require.NoError(t, l.AddSpend(ctx, SpendKey{Conversation: "b"}, 2))
	conv, _, _ := l.Spent(ctx, SpendKey{Conversation: "a"})
	require.InDelta(t, 1, conv, 0, "kept while resumable")
	now = now.Add(43 * time.Hour) // 73 h idle
	require.NoError(t, l.AddSpend(ctx, SpendKey{Conversation: "b"}, 2))
	conv, _, _ = l.Spent(ctx, SpendKey{Conversation: "a"})
	require.Zero(t, conv, "forgotten once it can no longer be resumed")
}
