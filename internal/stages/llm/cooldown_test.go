package llm

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/stages/llm/llmtest"
)

// TestCooldowns: a 429 with a wait longer than the request's time, or an
// exhausted quota, puts the provider in a cooldown; requests then skip it
// without an attempt, and a cooldown started elsewhere (a shared store) is
// honoured the same way.
func TestCooldowns(t *testing.T) {
	tests := []struct {
		name  string
		reply llmtest.Reply
		ext   time.Time // a cooldown started by another instance
	}{
		{"retry-after", llmtest.OpenAIStatus(429, map[string]string{"retry-after": "30"}, "slow down", "rate_limit_error", nil), time.Time{}},
		{"quota", llmtest.OpenAIStatus(429, nil, "You exceeded your current quota", "insufficient_quota", "insufficient_quota"), time.Time{}},
		{"shared", ok("openai"), time.Now().Add(time.Minute)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig()
			cfg.MaxRetries = -1
			cd := NewLocalCooldowns()
			cfg.Cooldowns = cd
			if !tt.ext.IsZero() {
				cd.Start(CooldownKey("openai", "openai-model"), tt.ext, "test")
			}
			f := newFixture(t, cfg, link{"openai", []llmtest.Reply{tt.reply}}, link{"backup", []llmtest.Reply{ok("backup")}})
			for range 3 {
				o := f.generate(t, time.Second)
				require.NoError(t, o.err)
				require.Equal(t, "backup", o.gen.Provider)
			}
			want := []string{"openai", "backup", "backup", "backup"}
			skips := 2.0
			if !tt.ext.IsZero() {
				want, skips = []string{"backup", "backup", "backup"}, 3
			}
			require.Equal(t, want, f.journal.Names())
			require.Equal(t, skips, testutil.ToFloat64(f.chain.m.skips.WithLabelValues("openai", "openai-model", "cooldown")))
			require.True(t, time.Now().Before(cd.Until(CooldownKey("openai", "openai-model"))))
		})
	}
}
