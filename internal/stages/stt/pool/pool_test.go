package pool

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/voiced/voiced/internal/pipeline"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const testTimeout = 10 * time.Second

type res struct {
	id        int
	used      bool
	destroyed bool
}

// fake records what the pool does to its resources.
type fake struct {
	mu        sync.Mutex
	built     []*res
	resets    int
	failReset bool
	failBuild int // build number (1-based) that fails; 0 = none
	// discardReset: Reset reports that the resource is to be replaced.
	discardReset bool
}

func (f *fake) funcs() Funcs[*res] {
	return Funcs[*res]{
		Build: func(ctx context.Context) (*res, error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			if f.failBuild == len(f.built)+1 {
				return nil, errors.New("build failed")
			}
			r := &res{id: len(f.built)}
			f.built = append(f.built, r)
			return r, nil
		},
		Reset: func(_ context.Context, r *res) error {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.resets++
			if f.failReset {
				return errors.New("reset failed")
			}
			if f.discardReset {
				return fmt.Errorf("long utterance: %w", ErrDiscard)
			}
			r.used = false
			return nil
		},
		Destroy: func(r *res) {
			f.mu.Lock()
			defer f.mu.Unlock()
			r.destroyed = true
		},
	}
}

func (f *fake) allDestroyed(t *testing.T) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, r := range f.built {
		require.True(t, r.destroyed, "resource %d not destroyed", r.id)
	}
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func newPool(t *testing.T, f *fake, cfg Config) *Pool[*res] {
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	p, err := New(ctx, cfg, f.funcs(), quiet, prometheus.NewRegistry())
	require.NoError(t, err)
	return p
}

func TestAcquireReleaseReuse(t *testing.T) {
	f := &fake{}
	p := newPool(t, f, Config{Size: 2, Workers: 2, Name: "t"})
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	a, err := p.Acquire(ctx)
	require.NoError(t, err)
	b, err := p.Acquire(ctx)
	require.NoError(t, err)
	require.NotSame(t, a, b)
	require.Equal(t, 2.0, testutil.ToFloat64(p.inUse))
	p.Release(a, true)
	c, err := p.Acquire(ctx)
	require.NoError(t, err)
	require.Same(t, a, c, "a released resource is reused, not rebuilt")
	p.Release(b, true)
	p.Release(c, true)
	require.NoError(t, p.Close(ctx))
	require.Len(t, f.built, 2)
	f.allDestroyed(t)
}

// A dirty release is reset by the pool before anyone gets the resource.
func TestDirtyReleaseIsReset(t *testing.T) {
	f := &fake{}
	p := newPool(t, f, Config{Size: 1})
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	r, err := p.Acquire(ctx)
	require.NoError(t, err)
	r.used = true
	p.Release(r, false)
	r2, err := p.Acquire(ctx) // waits for the reset
	require.NoError(t, err)
	require.Same(t, r, r2)
	require.False(t, r2.used)
	p.Release(r2, true)
	require.NoError(t, p.Close(ctx))
	require.Equal(t, 1, f.resets)
}

func TestFailedResetRebuilds(t *testing.T) {
	f := &fake{failReset: true}
	p := newPool(t, f, Config{Size: 1})
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	r, err := p.Acquire(ctx)
	require.NoError(t, err)
	p.Release(r, false)
	r2, err := p.Acquire(ctx)
	require.NoError(t, err)
	require.NotSame(t, r, r2)
	require.True(t, r.destroyed)
	require.Equal(t, 1.0, testutil.ToFloat64(p.rebuilds))
	p.Release(r2, true)
	require.NoError(t, p.Close(ctx))
	f.allDestroyed(t)
}

// When every resource is busy, Acquire gives up with ErrOverloaded after
// MaxWait even though its context would allow more, and after the context's
// deadline when that comes first; a cancelled context gives its own error.
func TestOverloaded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fake{}
		p := newPool(t, f, Config{Size: 1, MaxWait: 200 * time.Millisecond})
		ctx := context.Background()
		held, err := p.Acquire(ctx)
		require.NoError(t, err)

		start := time.Now()
		_, err = p.Acquire(ctx)
		require.ErrorIs(t, err, pipeline.ErrOverloaded)
		require.Equal(t, 200*time.Millisecond, time.Since(start))

		dctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		start = time.Now()
		_, err = p.Acquire(dctx)
		cancel()
		require.ErrorIs(t, err, pipeline.ErrOverloaded)
		require.Equal(t, 50*time.Millisecond, time.Since(start))

		cctx, cancel := context.WithCancel(ctx)
		go func() {
			time.Sleep(10 * time.Millisecond)
			cancel()
		}()
		_, err = p.Acquire(cctx)
		require.ErrorIs(t, err, context.Canceled)
		require.NotErrorIs(t, err, pipeline.ErrOverloaded)
		require.Equal(t, 2.0, testutil.ToFloat64(p.overloaded))

		// A waiter gets the resource as soon as it is released.
		go func() {
			time.Sleep(100 * time.Millisecond)
			p.Release(held, true)
		}()
		start = time.Now()
		r, err := p.Acquire(ctx)
		require.NoError(t, err)
		require.Equal(t, 100*time.Millisecond, time.Since(start))
		p.Release(r, true)
		require.NoError(t, p.Close(ctx))
	})
}

func TestCloseWaitsForOutstanding(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fake{}
		p := newPool(t, f, Config{Size: 2})
		ctx := context.Background()
		r, err := p.Acquire(ctx)
		require.NoError(t, err)
		go func() {
			time.Sleep(time.Second)
			p.Release(r, false)
		}()
		start := time.Now()
		require.NoError(t, p.Close(ctx))
		require.Equal(t, time.Second, time.Since(start))
		f.allDestroyed(t)
		_, err = p.Acquire(ctx)
		require.ErrorIs(t, err, ErrClosed)
		require.NoError(t, p.Close(ctx), "second Close is a no-op")
	})
}

func TestCloseGivesUpAtDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fake{}
		p := newPool(t, f, Config{Size: 2})
		_, err := p.Acquire(context.Background())
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		err = p.Close(ctx)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		// The free one is destroyed; the one still out is left alone.
		n := 0
		for _, r := range f.built {
			if r.destroyed {
				n++
			}
		}
		require.Equal(t, 1, n)
	})
}

func TestBuildFailureCleansUp(t *testing.T) {
	f := &fake{failBuild: 3}
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	_, err := New(ctx, Config{Size: 4, Workers: 1}, f.funcs(), quiet, nil)
	require.ErrorContains(t, err, "build failed")
	require.Len(t, f.built, 2)
	f.allDestroyed(t)

	_, err = New(ctx, Config{Size: 0}, f.funcs(), quiet, nil)
	require.Error(t, err)
}
