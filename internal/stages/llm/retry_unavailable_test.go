package llm

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/stages/llm/provider"
)

// TestNoRetryWaitWhenTheRetryCannotBeMade: when the failure about to be
// retried opened the provider's breaker, or a cooldown set meanwhile (by
// another instance) outlasts the wait, the retry would be skipped after
// the wait. The chain falls back at once instead of sleeping the server's
// Retry-After or the backoff out of the next provider's time.
func TestNoRetryWaitWhenTheRetryCannotBeMade(t *testing.T) {
	for _, tc := range []struct {
		name     string
		failures int // BreakerFailures
		err      *provider.Error
		cooldown time.Duration // started by "another instance" during the attempt
	}{
		{name: "429 with Retry-After opens the breaker", failures: 1, err: rateLimited(250 * time.Millisecond)},
		{name: "503 with backoff opens the breaker", failures: 1, err: &provider.Error{Kind: provider.KindTransient, Status: 503}},
		{name: "503, a longer cooldown from elsewhere", failures: 5, err: &provider.Error{Kind: provider.KindTransient, Status: 503}, cooldown: 30 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cfg := timingConfig()
				cfg.BreakerFailures = tc.failures
				first := step{err: tc.err}
				a := &fakeProvider{name: "a", script: []step{first, okStep}}
				b := &fakeProvider{name: "b", script: []step{okStep}}
				c := fakeChain(t, cfg, a, b)
				if tc.cooldown > 0 {
					a.script[0].during = func() {
						c.cooldowns.Start(CooldownKey(a.Name(), a.Model()), time.Now().Add(tc.cooldown), "rate_limit")
					}
				}
				r := gen(c, 700*time.Millisecond)
				require.NoError(t, r.err)
				require.Equal(t, "b", r.gen.Provider)
				require.Len(t, a.Calls(), 1, "the retry could not be made")
				require.Equal(t, time.Duration(0), b.Calls()[0].at.Sub(a.Calls()[0].at),
					"slept for a retry that could not be made, out of b's time")
			})
		})
	}
}
