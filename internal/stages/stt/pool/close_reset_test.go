package pool

import (
	"bytes"
	"context"
	"log/slog"
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

// A rebuild that Close's deadline cuts short is not a failure: it logs at
// debug level only and starts no retry. It logged "stt decoder rebuild
// failed; retrying" at error level on every such shutdown, and started a
// retry that gave up at once.
func TestCloseCutsRebuildQuietly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fake{failReset: true}
		fn := f.funcs()
		build := fn.Build
		rebuilding := make(chan struct{})
		fn.Build = func(ctx context.Context) (*res, error) {
			f.mu.Lock()
			n := len(f.built)
			f.mu.Unlock()
			if n < 2 { // New's
				return build(ctx)
			}
			close(rebuilding)
			<-ctx.Done() // a build that outlasts Close's bound
			return nil, ctx.Err()
		}
		var logs bytes.Buffer
		log := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		ctx := context.Background()
		p, err := New(ctx, Config{Size: 2}, fn, log, prometheus.NewRegistry())
		require.NoError(t, err)
		_, err = p.Acquire(ctx) // never released: Close waits out its deadline
		require.NoError(t, err)
		r, err := p.Acquire(ctx)
		require.NoError(t, err)
		p.Release(r, false) // the reset fails: destroyed and rebuilt
		<-rebuilding
		before := logs.Len()

		cctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		require.ErrorIs(t, p.Close(cctx), context.DeadlineExceeded)
		synctest.Wait()
		after := logs.String()[before:]
		require.NotContains(t, after, `"level":"ERROR"`)
		require.NotContains(t, after, `"level":"WARN"`)
		require.NotContains(t, after, "retrying")
		require.Contains(t, after, `"level":"DEBUG"`)
		p.mu.Lock()
		defer p.mu.Unlock()
		require.Equal(t, 1, p.failed, "the slot is given up once")
		require.Equal(t, 1, p.out, "only the resource never released is still out")
	})
}
