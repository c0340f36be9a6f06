package pool

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
)

// TestFailedRebuildIsRetried: a resource whose reset failed is destroyed
// and rebuilt; when that rebuild failed (a transient error: memory, a
// file briefly unreadable), the pool shrank for good -- p.failed counted
// it and nothing read it. With one decoder (or after as many failures as
// decoders) every later utterance waited MaxWait and was refused
// overloaded until the server restarted, while the engine still reported
// ready. The pool retries the rebuild instead.
func TestFailedRebuildIsRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fake{failReset: true}
		fn := f.funcs()
		calls := 0
		build := fn.Build
		fn.Build = func(ctx context.Context) (*res, error) {
			calls++ // call 1: New's; call 2: the first rebuild, which fails once
			if calls == 2 {
				return nil, errors.New("transient")
			}
			return build(ctx)
		}
		p, err := New(t.Context(), Config{Size: 1, Name: "t"}, fn, quiet, nil)
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		r, err := p.Acquire(ctx)
		require.NoError(t, err)
		p.Release(r, false) // reset fails, the rebuild fails
		synctest.Wait()

		r2, err := p.Acquire(ctx)
		require.NoError(t, err, "the pool's only resource is gone for good")
		require.NotSame(t, r, r2)
		p.Release(r2, true)
		require.NoError(t, p.Close(ctx))
		f.allDestroyed(t)
	})
}

// TestCloseDuringRebuildRetry: Close does not wait out a rebuild that
// keeps failing; the slot is given up and Close returns at once.
func TestCloseDuringRebuildRetry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fake{failReset: true, failBuild: 2} // every rebuild fails
		p := newPool(t, f, Config{Size: 1, Name: "t"})
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		r, err := p.Acquire(ctx)
		require.NoError(t, err)
		p.Release(r, false)
		synctest.Wait()
		start := time.Now()
		require.NoError(t, p.Close(ctx))
		require.Less(t, time.Since(start), time.Second)
		f.allDestroyed(t)
	})
}
