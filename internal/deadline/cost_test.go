package deadline_test

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/deadline"
)

func TestLearnedMinimum(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name    string
		runs    []time.Duration
		min     time.Duration // configured
		wantMin time.Duration
	}{
		{name: "not measured: a millisecond", runs: make([]time.Duration, 15), min: 120 * ms, wantMin: ms},
		{name: "cheap stage: its cost, at least a millisecond", runs: repeat(100*time.Microsecond, 16), min: 120 * ms, wantMin: ms},
		{name: "p99, not the mean", runs: append(repeat(2*ms, 98), 40*ms, 40*ms), min: 120 * ms, wantMin: 40 * ms},
		{name: "never above the configured minimum", runs: repeat(900*ms, 20), min: 120 * ms, wantMin: 120 * ms},
		{name: "only the last 128 runs count", runs: append(repeat(90*ms, 50), repeat(3*ms, 128)...), min: 120 * ms, wantMin: 3 * ms},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c deadline.Cost
			for _, d := range tt.runs {
				c.Observe(d)
			}
			s := deadline.Stage{Name: "llm", Cap: time.Second, Min: tt.min}
			require.Equal(t, tt.wantMin, s.Learned(&c).Min)
			require.Equal(t, tt.min, s.Learned(nil).Min, "no cost: as configured")
		})
	}
}

func repeat(d time.Duration, n int) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = d
	}
	return out
}

// BenchmarkCostP99 is a stage's learned minimum at a high request rate:
// every call follows a new observation, so the percentile is recomputed
// each time.
func BenchmarkCostP99(b *testing.B) {
	var c deadline.Cost
	for i := range 128 {
		c.Observe(time.Duration(i%37) * time.Millisecond)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		c.Observe(time.Duration(i%41) * time.Millisecond)
		if _, ok := c.P99(); !ok {
			b.Fatal("not warm")
		}
		i++
	}
}

// TestPercentile99 checks the one-pass percentile against sorting, for
// every window length and runs in every order.
func TestPercentile99(t *testing.T) {
	// Nearest rank: ceil(0.99 n).
	for n, want := range map[int]int{1: 1, 16: 16, 100: 99, 101: 100, 128: 127} {
		require.Equal(t, want, deadline.Rank99(n), "n=%d", n)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for n := 1; n <= 128; n++ {
		for range 20 {
			runs := make([]time.Duration, n)
			for i := range runs {
				runs[i] = time.Duration(rng.IntN(50)) * time.Millisecond // repeats too
			}
			sorted := slices.Sorted(slices.Values(runs))
			want := sorted[deadline.Rank99(n)-1]
			require.Equal(t, want, deadline.Percentile99(runs), "n=%d runs=%v", n, runs)
		}
	}
}
