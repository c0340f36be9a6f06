package deadline_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/deadline"
)

// TestLearnedMinimumSparseTraffic: a remote LLM that takes 400 ms, on a
// server that answers a request every 10 s (6 runs a minute). Its slow
// runs keep the LLM's minimum at its flag (docs/architecture.md: "a
// remote provider's slow runs keep the LLM's minimum at its flag"): the
// age limit is there to let old runs go, not to forget a stage that runs
// fewer than 16 times a minute, whose minimum fell to 1 ms for good.
func TestLearnedMinimumSparseTraffic(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var c deadline.Cost
		s := deadline.Stage{Name: "llm", Cap: time.Second, Min: 120 * time.Millisecond}
		for range 40 {
			c.Observe(400 * time.Millisecond)
			time.Sleep(10 * time.Second)
		}
		require.Equal(t, 120*time.Millisecond, s.Learned(&c).Min, "measured slow a few seconds ago")
		time.Sleep(time.Minute)
		require.Equal(t, time.Millisecond, s.Learned(&c).Min, "nothing in the last minute: unmeasured")
	})
}
