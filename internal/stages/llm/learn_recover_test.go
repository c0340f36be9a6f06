package llm

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
)

// TestProviderSkippedForLearnedSlownessIsTriedAgain: a provider whose
// learned speed became too slow for the time requests have is skipped
// (no_time), but a skipped provider teaches nothing new, so a slowdown
// that has passed used to keep it skipped until a restart. Each such
// skip, when its configured start speed would have fitted, moves the
// learned speed a learning step back towards it, so it is tried again.
func TestProviderSkippedForLearnedSlownessIsTriedAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := timingConfig()
		cfg.LearnAlpha = 1 // the last sample is the learned speed
		// A slow spell: 100 ms to the first token, then 2 tokens in 300 ms
		// (6.7/s): 8 tokens would take 1.3 s, more than a 700 ms budget has.
		slow := step{delay: 100 * time.Millisecond, pieces: []string{"One, ", "two, ", "three."}, gap: 150 * time.Millisecond, tokens: 3}
		a := &fakeProvider{name: "a", script: []step{slow, okStep}}
		c := fakeChain(t, cfg, a)
		require.NoError(t, gen(c, time.Second).err)
		r := gen(c, 700*time.Millisecond)
		require.NoError(t, r.err)
		require.Equal(t, "extractive", r.gen.Provider, "skipped: its learned speed does not fit")
		require.Equal(t, 1.0, testutil.ToFloat64(c.m.skips.WithLabelValues("a", "a-model", "no_time")))
		r = gen(c, 700*time.Millisecond)
		require.NoError(t, r.err)
		require.Equal(t, "a", r.gen.Provider, "tried again once its learned speed came back towards the configured one")
		require.Len(t, a.Calls(), 2)
	})
}
