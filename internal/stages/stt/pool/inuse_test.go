package pool

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
)

// TestInUseGaugeCountsOnlyHandedOut: voiced_stt_decoders_in_use is
// "Decoders handed out to utterances", so it can never exceed the pool's
// size. Acquire counts a waiter in p.out before it has a decoder (so Close
// waits for it), and every gauge update publishes p.out: callers still
// waiting showed up as decoders in use.
func TestInUseGaugeCountsOnlyHandedOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPool(t, &fake{}, Config{Size: 1, MaxWait: time.Second, Name: "t"})
		ctx := context.Background()
		held, err := p.Acquire(ctx)
		require.NoError(t, err)

		got := make(chan *res, 2)
		for range 2 {
			go func() {
				r, err := p.Acquire(ctx)
				if err != nil {
					r = nil
				}
				got <- r
			}()
		}
		synctest.Wait() // both wait for the one decoder
		p.Release(held, true)
		first := <-got // one waiter has it, the other still waits
		require.NotNil(t, first)
		synctest.Wait()
		inUse := testutil.ToFloat64(p.inUse)

		p.Release(first, true)
		if r := <-got; r != nil {
			p.Release(r, true)
		}
		require.NoError(t, p.Close(ctx))
		require.LessOrEqual(t, inUse, float64(p.Size()),
			"in-use gauge above the pool size: one decoder is out, one caller waits")
	})
}
