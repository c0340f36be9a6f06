package cancel_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/cancel"
)

func testCtx(t *testing.T) context.Context {
	ctx, c := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(c)
	return ctx
}

func TestCancelOneLeavesOthers(t *testing.T) {
	var r cancel.Registry[int]
	ctx := testCtx(t)
	a, _, err := r.Register(ctx, "a", 1, nil)
	require.NoError(t, err)
	b, _, err := r.Register(ctx, "b", 2, nil)
	require.NoError(t, err)

	h, ok := r.Cancel("a", cancel.Cancelled)
	require.True(t, ok)
	require.Equal(t, 1, h.Value)
	require.Equal(t, cancel.Cancelled, cancel.Of(a))
	require.NoError(t, b.Err(), "b is untouched")
	require.Equal(t, 1, r.Len())
	_, ok = r.Cancel("a", cancel.Cancelled)
	require.False(t, ok, "a is gone")
}

func TestRegisterDuplicateAndClose(t *testing.T) {
	var r cancel.Registry[string]
	ctx := testCtx(t)
	_, _, err := r.Register(ctx, "x", "first", nil)
	require.NoError(t, err)
	_, _, err = r.Register(ctx, "x", "second", nil)
	require.ErrorIs(t, err, cancel.ErrExists)

	y, _, err := r.Register(ctx, "y", "y", nil)
	require.NoError(t, err)
	hs := r.Close(cancel.ClientDisconnect)
	require.Len(t, hs, 2)
	require.Equal(t, cancel.ClientDisconnect, cancel.Of(y))
	_, _, err = r.Register(ctx, "z", "z", nil)
	require.ErrorIs(t, err, cancel.ErrClosed)
}

func TestCancelAllLeavesRegistryOpen(t *testing.T) {
	var r cancel.Registry[int]
	ctx := testCtx(t)
	a, _, _ := r.Register(ctx, "a", 1, nil)
	require.Len(t, r.CancelAll(cancel.Replaced), 1)
	require.Equal(t, cancel.Replaced, cancel.Of(a))
	_, _, err := r.Register(ctx, "a", 2, nil)
	require.NoError(t, err, "a replacement may reuse the id")
}

// TestHandlesLeavesRegistrations: a snapshot that cancels nothing and
// removes nothing.
func TestHandlesLeavesRegistrations(t *testing.T) {
	var r cancel.Registry[int]
	ctx := testCtx(t)
	a, _, _ := r.Register(ctx, "a", 1, nil)
	_, _, _ = r.Register(ctx, "b", 2, nil)
	require.Len(t, r.Handles(), 2)
	require.NoError(t, a.Err())
	require.Equal(t, 2, r.Len())
	_, _, err := r.Register(ctx, "a", 3, nil)
	require.ErrorIs(t, err, cancel.ErrExists)
}

// TestReleaseOnlyOwnEntry checks a replaced request cannot remove its
// replacement when it finally ends.
func TestReleaseOnlyOwnEntry(t *testing.T) {
	var r cancel.Registry[int]
	ctx := testCtx(t)
	_, old, _ := r.Register(ctx, "id", 1, nil)
	old.Cancel(cancel.Replaced)
	newCtx, _, err := r.Register(ctx, "id", 2, nil)
	require.NoError(t, err)
	old.Release()
	h, ok := r.Get("id")
	require.True(t, ok)
	require.Equal(t, 2, h.Value)
	require.NoError(t, newCtx.Err())
}

func TestOf(t *testing.T) {
	ctx := testCtx(t)
	tests := []struct {
		name string
		make func() context.Context
		want *cancel.Cause
	}{
		{"live", func() context.Context { return ctx }, nil},
		{"typed cause", func() context.Context {
			c, f := context.WithCancelCause(ctx)
			f(cancel.Shutdown)
			return c
		}, cancel.Shutdown},
		{"deadline without cause", func() context.Context {
			c, f := context.WithDeadline(ctx, time.Now().Add(-time.Second))
			t.Cleanup(f)
			return c
		}, cancel.RequestDeadline},
		{"plain cancel", func() context.Context {
			c, f := context.WithCancel(ctx)
			f()
			return c
		}, cancel.Cancelled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, cancel.Of(tt.make()))
		})
	}
}

func TestConcurrentUse(t *testing.T) {
	var r cancel.Registry[int]
	ctx := testCtx(t)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			id := string(rune('a' + i))
			for range 200 {
				_, h, err := r.Register(ctx, id, i, nil)
				require.NoError(t, err)
				if i%2 == 0 {
					h.Release()
				} else {
					r.Cancel(id, cancel.Cancelled)
				}
			}
		})
	}
	wg.Wait()
	require.Zero(t, r.Len())
}

func BenchmarkRegisterRelease(b *testing.B) {
	var r cancel.Registry[int]
	ctx := context.Background()
	for b.Loop() {
		_, h, _ := r.Register(ctx, "r1", 1, nil)
		h.Release()
	}
}

func BenchmarkRegisterCancel(b *testing.B) {
	var r cancel.Registry[int]
	ctx := context.Background()
	for b.Loop() {
		r.Register(ctx, "r1", 1, nil)
		r.Cancel("r1", cancel.Cancelled)
	}
}
