package saturation

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
)

// TestCalmAgainstTheThresholdItWentOver: a process that went saturated by
// its own load (busy, delay over Threshold) clears only after Hold under
// half of Threshold (docs/architecture.md, Saturation: "It clears after a
// second under half the threshold it went over (12.5 ms, or 50 ms for the
// starved rule)"). Shedding lowers its CPU share: once under MinBusy, while
// it still has work, its delay was judged against StarvedThreshold instead,
// so 40 ms (over the 25 ms threshold itself) read as calm, the saturation
// cleared, the work came back, and the server went saturated again: an
// episode per second while the delay never left 30-40 ms.
func TestCalmAgainstTheThresholdItWentOver(t *testing.T) {
	ms := time.Millisecond
	reg := prometheus.NewRegistry()
	m := New(Config{Threshold: 25 * ms}, reg) // starved rule: 100 ms
	now := time.Unix(1000, 0)
	var calm time.Time
	for cycle := range 5 {
		// Its own load: 1.1 cores of 2 and 30 ms late.
		now = now.Add(100 * ms)
		calm = m.observe(30*ms, 0.55, 500, now, calm)
		require.True(t, m.Saturated(), "cycle %d", cycle)
		// Shedding: a little under a core, still 40 ms late, still busy
		// with work (500 wake-ups a second).
		for range 12 {
			now = now.Add(100 * ms)
			calm = m.observe(40*ms, 0.45, 500, now, calm)
			require.True(t, m.Saturated(), "cycle %d: cleared while 40 ms late, over the 25 ms it went over", cycle)
		}
	}
	require.EqualValues(t, 1, testutil.ToFloat64(m.transitions), "one episode, not one a second")

	// Calm for real (under 12.5 ms for a second) clears it.
	for range 11 {
		now = now.Add(100 * ms)
		calm = m.observe(10*ms, 0.45, 500, now, calm)
	}
	require.False(t, m.Saturated())

	// Idle (little CPU, few wake-ups) still counts as calm.
	now = now.Add(100 * ms)
	calm = m.observe(30*ms, 0.55, 500, now, calm)
	require.True(t, m.Saturated())
	for range 11 {
		now = now.Add(100 * ms)
		calm = m.observe(40*ms, 0.01, 5, now, calm)
	}
	require.False(t, m.Saturated(), "an idle process is calm")

	// Gone over the starved rule, it clears under half of that.
	now = now.Add(100 * ms)
	calm = m.observe(120*ms, 0.05, 500, now, calm)
	require.True(t, m.Saturated())
	for range 11 {
		now = now.Add(100 * ms)
		calm = m.observe(40*ms, 0.05, 500, now, calm)
	}
	require.False(t, m.Saturated(), "under half StarvedThreshold for a second")
}
