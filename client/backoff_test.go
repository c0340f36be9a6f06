package client

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestBackoff: attempt n waits between half and all of
// min(Initial x 2^n, Max), and the waits are spread (jitter).
func TestBackoff(t *testing.T) {
	p := Config{}.withDefaults().Reconnect
	for _, tc := range []struct {
		n        int
		min, max time.Duration
	}{
		{0, 50 * time.Millisecond, 100 * time.Millisecond},
		{1, 100 * time.Millisecond, 200 * time.Millisecond},
		{3, 400 * time.Millisecond, 800 * time.Millisecond},
		{6, 2500 * time.Millisecond, 5 * time.Second},  // 6.4 s capped at Max
		{40, 2500 * time.Millisecond, 5 * time.Second}, // no overflow
	} {
		seen := map[time.Duration]bool{}
		for range 200 {
			d := backoff(p, tc.n)
			require.GreaterOrEqual(t, d, tc.min, "attempt %d", tc.n)
			require.LessOrEqual(t, d, tc.max, "attempt %d", tc.n)
			seen[d] = true
		}
		require.Greater(t, len(seen), 50, "attempt %d: no jitter", tc.n)
	}
}

// TestBackoffLongInitial: a long Initial with many attempts reaches Max
// without overflowing (a negative wait made rand.N panic).
func TestBackoffLongInitial(t *testing.T) {
	p := Reconnect{Initial: 20 * time.Second, Max: time.Minute, Attempts: 70}
	for n := range p.Attempts {
		d := backoff(p, n)
		require.GreaterOrEqual(t, d, time.Duration(0), "attempt %d", n)
		require.LessOrEqual(t, d, p.Max, "attempt %d", n)
	}
}
