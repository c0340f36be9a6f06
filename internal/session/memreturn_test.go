package session

import (
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
)

// TestMemReturn: memory is returned once per burst of at least burst
// admissions, after quiet with no admission, never during the burst, and
// not after stop.
func TestMemReturn(t *testing.T) {
	const quiet, burst = 2 * time.Second, 10
	cases := []struct {
		name string
		// gaps are the waits before each admission.
		gaps []time.Duration
		stop bool // stop right after the last admission
		want int  // returns in the end
	}{
		{"a burst, then quiet", repeat(burst, 10*time.Millisecond), false, 1},
		{"too few", repeat(burst-1, 10*time.Millisecond), false, 0},
		// Pauses shorter than quiet do not end the burst.
		{"pauses within the burst", repeat(3*burst, 1500*time.Millisecond), false, 1},
		{"two bursts", append(repeat(burst, time.Millisecond), repeat(burst, 5*time.Second)...), false, 2},
		{"a slow trickle is a burst once it adds up", repeat(burst, 3*time.Second), false, 1},
		{"stopped", repeat(burst, time.Millisecond), true, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var returns atomic.Int32
				var cpu atomic.Int64
				start := time.Now()
				var lastAdmit atomic.Int64 // UnixNano
				m := &memReturn{quiet: quiet, burst: burst,
					free: func() time.Duration {
						require.GreaterOrEqual(t, time.Since(time.Unix(0, lastAdmit.Load())), quiet, "returned before the burst was over")
						returns.Add(1)
						return time.Millisecond
					},
					returned: func(d time.Duration) { cpu.Add(int64(d)) }}
				for _, g := range tc.gaps {
					time.Sleep(g)
					lastAdmit.Store(time.Now().UnixNano())
					m.admit()
				}
				if tc.stop {
					m.stop()
				}
				time.Sleep(10 * quiet)
				synctest.Wait()
				require.EqualValues(t, tc.want, returns.Load(), "returns after %v", time.Since(start))
				require.EqualValues(t, int64(tc.want)*int64(time.Millisecond), cpu.Load())
				m.stop()
			})
		})
	}
}

// TestMemReturnStopWaits: stop waits for a return in progress, and a
// non-positive quiet never returns anything.
func TestMemReturnStopWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		var done atomic.Bool
		m := &memReturn{quiet: time.Second, burst: 1, free: func() time.Duration {
			<-release
			done.Store(true)
			return 0
		}}
		m.admit()
		time.Sleep(2 * time.Second)
		synctest.Wait() // the return is blocked in free
		stopped := make(chan struct{})
		go func() {
			m.stop()
			close(stopped)
		}()
		synctest.Wait()
		select {
		case <-stopped:
			t.Fatal("stop returned while a return was in progress")
		default:
		}
		close(release)
		<-stopped
		require.True(t, done.Load())
	})
	synctest.Test(t, func(t *testing.T) {
		m := &memReturn{quiet: -1, burst: 1, free: func() time.Duration {
			t.Error("returned with a negative quiet")
			return 0
		}}
		for range 10 {
			m.admit()
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		m.stop()
	})
}

func repeat(n int, d time.Duration) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = d
	}
	return out
}

// TestMemReturnWaitsWhileBusy: a process that sheds or runs late does not
// return memory; the return comes a quiet period after it is calm again.
func TestMemReturnWaitsWhileBusy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var busy atomic.Bool
		busy.Store(true)
		var returnedAt atomic.Int64
		m := &memReturn{quiet: time.Second, burst: 1, busy: busy.Load, free: func() time.Duration {
			returnedAt.Store(time.Now().UnixNano())
			return 0
		}}
		defer m.stop()
		m.admit()
		time.Sleep(5 * time.Second)
		synctest.Wait()
		require.Zero(t, returnedAt.Load(), "returned while busy")
		calm := time.Now()
		busy.Store(false)
		time.Sleep(3 * time.Second)
		synctest.Wait()
		require.NotZero(t, returnedAt.Load(), "no return once calm")
		require.LessOrEqual(t, time.Unix(0, returnedAt.Load()).Sub(calm), time.Second)
	})
}
