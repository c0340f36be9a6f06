package saturation

import (
	"context"
	"math"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestObserve walks the saturated state through a series of samples: on
// at once above the threshold, off only after Hold under half of it.
func TestObserve(t *testing.T) {
	ms := time.Millisecond
	steps := []struct {
		at    time.Duration // since the start
		delay time.Duration
		want  bool
	}{
		{0, 1 * ms, false},
		{100 * ms, 9 * ms, false},    // under the threshold
		{200 * ms, 11 * ms, true},    // over: saturated at once
		{300 * ms, 2 * ms, true},     // calm starts
		{900 * ms, 2 * ms, true},     // calm, not for long enough
		{1000 * ms, 7 * ms, true},    // between half and full: calm broken
		{1100 * ms, 1 * ms, true},    // calm again from here
		{2000 * ms, 1 * ms, true},    // 900 ms
		{2100 * ms, 1 * ms, false},   // 1 s calm: takes work again
		{2200 * ms, 10 * ms, false},  // at the threshold is not over it
		{2300 * ms, 10*ms + 1, true}, // just over
		{2400 * ms, 0, true},         //
		{3400 * ms, 0, false},        // a second later
	}
	m := New(Config{}, nil)
	start := time.Unix(1000, 0)
	var calm time.Time
	for i, s := range steps {
		calm = m.observe(s.delay, 1, 0, start.Add(s.at), calm)
		require.Equal(t, s.want, m.Saturated(), "step %d (%v, delay %v)", i, s.at, s.delay)
		require.Equal(t, s.delay, m.Delay())
	}
}

// TestNegativeThresholdNeverSheds: shedding off still measures.
func TestNegativeThresholdNeverSheds(t *testing.T) {
	m := New(Config{Threshold: -1}, nil)
	m.observe(time.Second, 1, 1000, time.Now(), time.Time{})
	require.False(t, m.Saturated())
	require.Equal(t, time.Second, m.Delay())
	var nilMonitor *Monitor
	require.False(t, nilMonitor.Saturated())
}

// TestIdleProcessNeverSheds: a delay other processes cause while this one
// uses little CPU is not saturation.
func TestIdleProcessNeverSheds(t *testing.T) {
	m := New(Config{}, nil)
	m.observe(time.Second, 0.2, 0, time.Now(), time.Time{})
	require.False(t, m.Saturated())
	require.Equal(t, 0.2, m.Busy())
	m.observe(time.Second, 0.6, 0, time.Now(), time.Time{})
	require.True(t, m.Saturated())
}

// TestCPUMeter: CPU the process burns shows in its busy share. (A share
// of the machine cannot be asserted on a loaded machine: the spinning
// goroutine gets what the other processes leave it.)
func TestCPUMeter(t *testing.T) {
	c := newCPUMeter()
	start, spent := time.Now(), c.lastCPU
	for processCPU()-spent < 20*time.Millisecond && time.Since(start) < 10*time.Second {
	}
	wall := time.Since(start)
	used := c.busy(time.Now()) * float64(usableCPUs()) * wall.Seconds()
	require.InDelta(t, (processCPU() - spent).Seconds(), used, 0.01, "busy is the CPU used over the wall time")
	require.Greater(t, used, 0.015)
}

// TestRunStopsAndSamples: Run samples on its ticker and returns with its
// context.
func TestRunStopsAndSamples(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := New(Config{Interval: 10 * time.Millisecond}, nil)
		// Values no sample can give: a sample overwrites them.
		m.delay.Store(-1)
		m.busy.Store(math.Float64bits(math.NaN()))
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() {
			m.Run(ctx)
			close(done)
		}()
		time.Sleep(55 * time.Millisecond)
		synctest.Wait()
		require.GreaterOrEqual(t, m.Delay(), time.Duration(0), "no sample was taken")
		require.False(t, math.IsNaN(m.Busy()), "no sample was taken")
		require.False(t, m.Saturated(), "an idle bubble is not saturated")
		cancel()
		<-done
	})
}

// TestSamplerSeesDelay: with far more runnable goroutines than CPUs the
// scheduler's latency percentile is above zero.
func TestSamplerSeesDelay(t *testing.T) {
	s := newSampler()
	s.p99() // the baseline
	stop := make(chan struct{})
	done := make(chan struct{}, 64)
	for range 64 {
		go func() {
			defer func() { done <- struct{}{} }()
			for {
				select {
				case <-stop:
					return
				default:
					for i := 0; i < 1e5; i++ {
						_ = i * i
					}
				}
			}
		}()
	}
	deadline := time.Now().Add(5 * time.Second)
	var p time.Duration
	var wakeups float64
	for p == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
		p, wakeups = s.p99()
	}
	close(stop)
	for range 64 {
		<-done
	}
	require.Positive(t, p, "64 busy goroutines must wait to run")
	require.Positive(t, wakeups, "and the scheduler sampled their wake-ups")
}

// TestStarvedProcessSheds: a process starved by others gets little CPU
// however much work it has. With work (its goroutines woken often) a
// delay over StarvedThreshold sheds; an idle one delayed by others does
// not, however late, nor does one with work delayed by less.
func TestStarvedProcessSheds(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name    string
		delay   time.Duration
		busy    float64
		wakeups float64 // a second
		sheds   bool
	}{
		{"idle, delayed by others", time.Second, 0.01, 20, false},
		{"using a core", 11 * ms, 0.5, 0, true},
		{"starved with work", 41 * ms, 0.05, 600, true},
		{"with work, delayed less than StarvedThreshold", 40 * ms, 0.05, 600, false},
		{"little work, starved", time.Second, 0.05, 99, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := New(Config{}, nil) // threshold 10 ms, starved 40 ms, 100 wake-ups a second
			m.observe(tt.delay, tt.busy, tt.wakeups, time.Now(), time.Time{})
			require.Equal(t, tt.sheds, m.Saturated())
		})
	}
	m := New(Config{StarvedThreshold: -1}, nil)
	m.observe(time.Second, 0.05, 1000, time.Now(), time.Time{})
	require.False(t, m.Saturated(), "StarvedThreshold negative: never")

	// A starved process with work turns saturated past StarvedThreshold
	// and calm under half of it, as a busy one does against Threshold.
	steps := []struct {
		at    time.Duration
		delay time.Duration
		want  bool
	}{
		{0, 30 * ms, false},         // over the threshold, under StarvedThreshold
		{100 * ms, 41 * ms, true},   // starved
		{200 * ms, 30 * ms, true},   // still late: not calm
		{1100 * ms, 30 * ms, true},  // a second later, still not calm
		{1200 * ms, 19 * ms, true},  // under half StarvedThreshold: calm starts
		{2200 * ms, 19 * ms, false}, // a second of calm
		{2300 * ms, 30 * ms, false}, // under StarvedThreshold again: stays off
	}
	m = New(Config{}, nil)
	start := time.Unix(1000, 0)
	var calm time.Time
	for i, st := range steps {
		calm = m.observe(st.delay, 0.05, 600, start.Add(st.at), calm)
		require.Equal(t, st.want, m.Saturated(), "step %d (%v, delay %v)", i, st.at, st.delay)
	}
}

// TestRequestLimit walks the limit on requests in flight through a series
// of samples: 90% of what runs at each sample over the threshold, a
// twentieth more at each calm one while saturated and twice as much once
// that has cleared, lifted once it no longer binds and the
// saturation has cleared; within it, requests are admitted while
// saturated.
func TestRequestLimit(t *testing.T) {
	ms := time.Millisecond
	steps := []struct {
		at       time.Duration
		delay    time.Duration
		inFlight int
		limit    int
		sat      bool
	}{
		{0, 1 * ms, 100, 0, false},         // no limit until overloaded
		{100 * ms, 30 * ms, 100, 90, true}, // over: 90% of those in flight
		{200 * ms, 30 * ms, 95, 81, true},  // still over: from the limit, not the count above it
		{300 * ms, 30 * ms, 50, 45, true},  // fewer in flight than the limit: from them
		{400 * ms, 7 * ms, 45, 45, true},   // between half and full: held
		{500 * ms, 2 * ms, 45, 47, true},   // calm: a twentieth more
		{600 * ms, 2 * ms, 47, 49, true},   //
		{700 * ms, 2 * ms, 10, 51, true},   // not binding, but still saturated: kept
		{1600 * ms, 2 * ms, 10, 0, false},  // saturation cleared (1 s calm) and 51 > 2*10: lifted
		{1700 * ms, 30 * ms, 1, 2, true},   // never under MinLimit
		{1800 * ms, 2 * ms, 2, 3, true},    // +1 at least
		{2700 * ms, 2 * ms, 3, 4, true},    // 900 ms calm, still saturated
		{2800 * ms, 2 * ms, 4, 8, false},   // cleared while it binds: doubled
		{2900 * ms, 2 * ms, 8, 16, false},
		{3000 * ms, 6 * ms, 16, 16, false}, // not quite calm: held
		{3100 * ms, 2 * ms, 7, 0, false},   // 16 > 2*7: lifted
	}
	n := 0
	m := New(Config{}, nil)
	m.TrackRequests(func() int { return n })
	start := time.Unix(1000, 0)
	var calm time.Time
	for i, s := range steps {
		n = s.inFlight
		calm = m.observe(s.delay, 1, 0, start.Add(s.at), calm)
		require.Equal(t, s.limit, m.Limit(), "step %d (%v, delay %v, %d in flight)", i, s.at, s.delay, n)
		require.Equal(t, s.sat, m.Saturated(), "step %d", i)
		if s.limit > 0 {
			require.True(t, m.AdmitRequest(s.limit-1), "step %d: within the limit while saturated", i)
			require.False(t, m.AdmitRequest(s.limit), "step %d: at the limit", i)
		}
	}
}

// TestAdmitRequestWithoutTracking: without the count of requests in
// flight, nothing new starts while saturated; a nil monitor admits all.
func TestAdmitRequestWithoutTracking(t *testing.T) {
	m := New(Config{}, nil)
	require.True(t, m.AdmitRequest(1000))
	m.observe(30*time.Millisecond, 1, 0, time.Now(), time.Time{})
	require.True(t, m.Saturated())
	require.Zero(t, m.Limit())
	require.False(t, m.AdmitRequest(0))
	var nilMonitor *Monitor
	require.True(t, nilMonitor.AdmitRequest(1<<30))
}

// TestLag: Lag is the largest delay of the last LagWindow's samples,
// whatever the process's own CPU use (a starved process writes late as
// surely as a busy one), and forgets a delay once the window has passed.
func TestLag(t *testing.T) {
	ms := time.Millisecond
	m := New(Config{Interval: 100 * ms, LagWindow: 300 * ms}, nil)
	now := time.Unix(1000, 0)
	var calm time.Time
	for i, s := range []struct {
		delay time.Duration
		busy  float64
		want  time.Duration
	}{
		{2 * ms, 1, 2 * ms},
		{80 * ms, 0, 80 * ms}, // not its own doing: still its lag
		{5 * ms, 1, 80 * ms},
		{3 * ms, 1, 80 * ms},
		{1 * ms, 1, 5 * ms}, // 80 ms is three samples old
		{0, 0, 3 * ms},
		{0, 0, 1 * ms},
		{0, 0, 0},
	} {
		now = now.Add(100 * ms)
		calm = m.observe(s.delay, s.busy, 0, now, calm)
		require.Equal(t, s.want, m.Lag(), "sample %d", i)
	}
	var nilMonitor *Monitor
	require.Zero(t, nilMonitor.Lag())
}

// TestSteadyTickLateness: ticks that each arrive 60 ms after they were
// due (a process starved of CPU, whose timers run late, which the
// scheduler's latencies do not show) read as 60 ms late each, not as the
// change in lateness from the tick before (about 0 after the first).
func TestSteadyTickLateness(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const interval, late = 100 * time.Millisecond, 60 * time.Millisecond
		m := New(Config{Interval: interval, MinBusy: -1, LagWindow: time.Second}, nil)
		ticks := make(chan time.Time)
		m.ticks = func(time.Duration) (<-chan time.Time, func()) { return ticks, func() {} }
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() {
			m.Run(ctx)
			close(done)
		}()
		start := time.Now()
		for k := 1; k <= 10; k++ {
			due := start.Add(time.Duration(k) * interval)
			time.Sleep(time.Until(due.Add(late)))
			ticks <- due
			synctest.Wait()
			require.GreaterOrEqual(t, m.Delay(), late, "tick %d", k)
		}
		require.GreaterOrEqual(t, m.Lag(), late)
		require.True(t, m.Saturated(), "60 ms late on every tick is over the 10 ms threshold")
		cancel()
		<-done
	})
}
