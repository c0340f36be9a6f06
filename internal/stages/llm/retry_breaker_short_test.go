package llm

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/stages/llm/provider"
)

// TestRetryAllowedWhenTheBreakerHalfOpensWithinTheWait: a failure that
// opened the breaker denies its retry only while the breaker stays open
// past the wait. With -llm.breaker-open shorter than the wait (a
// Retry-After of 150 ms, the breaker open for 50 ms) the breaker is
// half-open when the wait ends, and admit lets the retry through as its
// probe.
func TestRetryAllowedWhenTheBreakerHalfOpensWithinTheWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := timingConfig()
		cfg.BreakerFailures = 1
		cfg.BreakerOpen = 50 * time.Millisecond
		first := step{err: &provider.Error{Kind: provider.KindTransient, Status: 503, RetryAfter: 150 * time.Millisecond}}
		a := &fakeProvider{name: "a", script: []step{first, okStep}}
		b := &fakeProvider{name: "b", script: []step{okStep}}
		c := fakeChain(t, cfg, a, b)
		r := gen(c, 700*time.Millisecond)
		require.NoError(t, r.err)
		require.Len(t, a.Calls(), 2, "the retry after the wait, the half-open breaker's probe")
		require.Equal(t, "a", r.gen.Provider)
	})
}
