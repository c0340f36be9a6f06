package sim

import (
	"context"
	"math"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/pipeline"
)

// TestNonFiniteShapeIsNotInstant: -sim-sigma NaN (or an Inf, or a slow
// factor that overflows a Duration) parses as a float flag. The stage's
// latency then converts a NaN or out-of-range float to a Duration, which
// on amd64 is the most negative Duration: every call returns at once, and
// the simulated stages silently stop simulating anything.
func TestNonFiniteShapeIsNotInstant(t *testing.T) {
	for name, cfg := range map[string]Config{
		"sigma NaN":         {Sigma: math.NaN(), SlowShare: -1, FailShare: -1},
		"slow factor +Inf":  {Sigma: -1, SlowShare: 1, SlowFactor: math.Inf(1), FailShare: -1},
		"slow factor 1e300": {Sigma: -1, SlowShare: 1, SlowFactor: 1e300, FailShare: -1},
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cfg.Seed = 1
				s := New(cfg)
				ctx, cancel := context.WithTimeout(t.Context(), time.Second)
				defer cancel()
				start := time.Now()
				_, _ = s.Intent.Classify(ctx, "hello")
				require.Greater(t, time.Since(start), time.Duration(0), "the call took no time at all")
				ctx, cancel = context.WithTimeout(t.Context(), time.Second)
				defer cancel()
				start = time.Now()
				_, _ = s.LLM.Generate(ctx, pipeline.GenerateRequest{}, func(string) {})
				require.Greater(t, time.Since(start), time.Duration(0), "the answer streamed in no time at all")
			})
		})
	}
}
