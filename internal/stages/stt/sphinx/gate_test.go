package sphinx

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
)

// The gate's order: at most n holders; when a CPU frees up, urgent waiters
// go first, each class first come first served.
func TestGateOrder(t *testing.T) {
	tests := []struct {
		name  string
		n     int
		queue []bool // urgency of the waiters, in arrival order
		want  []int  // the order the waiters get a CPU
	}{
		{"normal fifo", 1, []bool{false, false, false}, []int{0, 1, 2}},
		{"urgent first", 1, []bool{false, false, true}, []int{2, 0, 1}},
		{"urgent fifo", 1, []bool{true, false, true}, []int{0, 2, 1}},
		{"two cpus", 2, []bool{false, true, false, true}, []int{1, 3, 0, 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx := t.Context()
				g := newGate(tt.n)
				for range tt.n {
					require.NoError(t, g.acquire(ctx, false))
				}
				var (
					mu  sync.Mutex
					got []int
				)
				var wg sync.WaitGroup
				for i, urgent := range tt.queue {
					wg.Go(func() {
						require.NoError(t, g.acquire(ctx, urgent))
						mu.Lock()
						got = append(got, i)
						mu.Unlock()
					})
					synctest.Wait() // i is queued before i+1 arrives
				}
				// Free the CPUs one at a time; each waiter served keeps
				// its CPU until the next release.
				for range tt.queue {
					g.release()
					synctest.Wait()
				}
				wg.Wait()
				require.Equal(t, tt.want, got)
				for range tt.n {
					g.release()
				}
				require.Equal(t, tt.n, g.free)
			})
		})
	}
}

// A waiter whose context ends leaves the queue, holding nothing, and the
// CPU goes to the next waiter.
func TestGateCancelledWaiter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGate(1)
		require.NoError(t, g.acquire(t.Context(), false))

		why := errors.New("request cancelled")
		ctx, cancel := context.WithCancelCause(t.Context())
		gone := make(chan error, 1)
		go func() { gone <- g.acquire(ctx, true) }()
		next := make(chan error, 1)
		synctest.Wait()
		go func() { next <- g.acquire(t.Context(), false) }()
		synctest.Wait()

		cancel(why)
		require.ErrorIs(t, <-gone, why)
		g.release()
		require.NoError(t, <-next)
		g.release()
		require.Equal(t, 1, g.free)
		require.Empty(t, g.urgent)
		require.Empty(t, g.normal)

		// A context already ended is refused even with a CPU free, so
		// no work starts for a request that is over.
		dctx, stop := context.WithTimeout(t.Context(), time.Millisecond)
		defer stop()
		time.Sleep(2 * time.Millisecond)
		require.ErrorIs(t, g.acquire(dctx, true), context.DeadlineExceeded)
		require.Equal(t, 1, g.free)
	})
}
