package pool

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
)

// Close returns when its context ends even while the cleaner's Reset is
// waiting: in the recogniser, for a CPU held by an abandoned final pass
// that outlasts Close's bound. The waiting resource is destroyed, not
// rebuilt.
func TestCloseDoesNotWaitForBlockedReset(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fake{}
		fn := f.funcs()
		resetting := make(chan struct{})
		fn.Reset = func(ctx context.Context, r *res) error {
			close(resetting)
			<-ctx.Done() // a CPU that never comes free
			return ctx.Err()
		}
		ctx := context.Background()
		p, err := New(ctx, Config{Size: 2}, fn, quiet, prometheus.NewRegistry())
		require.NoError(t, err)
		_, err = p.Acquire(ctx) // never released: the final pass that holds the CPU
		require.NoError(t, err)
		r, err := p.Acquire(ctx)
		require.NoError(t, err)
		p.Release(r, false)
		<-resetting

		cctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		start := time.Now()
		require.ErrorIs(t, p.Close(cctx), context.DeadlineExceeded)
		require.Equal(t, time.Second, time.Since(start))
		require.True(t, r.destroyed)
		require.Zero(t, testutil.ToFloat64(p.rebuilds), "a reset cut short by Close is not a failure to rebuild for")
	})
}
