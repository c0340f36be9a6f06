package pool

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
)

// TryAcquire hands out a free resource only while more than the reserve
// are free, never waits, counts what it hands out as in use, and Close
// waits for those too.
func TestTryAcquire(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		p := newPool(t, &fake{}, Config{Size: 3, MaxWait: time.Millisecond, Name: "t"})

		a, ok := p.TryAcquire(1)
		require.True(t, ok, "3 free, reserve 1")
		b, ok := p.TryAcquire(1)
		require.True(t, ok, "2 free, reserve 1")
		_, ok = p.TryAcquire(1)
		require.False(t, ok, "1 free is the reserve")
		require.InDelta(t, 2, testutil.ToFloat64(p.inUse), 0)

		c, err := p.Acquire(ctx)
		require.NoError(t, err, "the reserve is left for Acquire")
		_, ok = p.TryAcquire(0)
		require.False(t, ok, "none free")

		closed := make(chan error, 1)
		go func() { closed <- p.Close(ctx) }()
		p.Release(c, true)
		p.Release(a, true)
		synctest.Wait()
		select {
		case err := <-closed:
			t.Fatalf("Close returned (%v) with a resource TryAcquire handed out still out", err)
		default:
		}
		p.Release(b, true)
		require.NoError(t, <-closed)
		_, ok = p.TryAcquire(0)
		require.False(t, ok, "closed")
	})
}
