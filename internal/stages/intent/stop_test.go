package intent

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

// stopAfter is a context whose Err is nil for its first n calls and
// context.Canceled after: a stop that comes while training runs, without
// a race against the training's speed.
type stopAfter struct {
	context.Context
	n atomic.Int64
}

func (c *stopAfter) Err() error {
	if c.n.Add(-1) < 0 {
		return context.Canceled
	}
	return nil
}

// TestNewStops: training stops once its context is done, at the next
// epoch, and New says why. It trained to the end whatever happened,
// which held voiced's start-up on a signal for the seconds training
// takes.
func TestNewStops(t *testing.T) {
	d, cfg, err := serverConfig()
	require.NoError(t, err)
	cfg.CalibrationFolds = -1
	cfg.Models = 1
	for _, tt := range []struct {
		name   string
		checks int64 // ctx.Err calls answered nil
	}{
		{"done before", 0},
		{"done after the third epoch", 3},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx := &stopAfter{Context: context.Background()}
			ctx.n.Store(tt.checks)
			c, err := New(ctx, d.Intents, cfg)
			require.ErrorIs(t, err, context.Canceled)
			require.ErrorContains(t, err, "intent: training stopped")
			require.Nil(t, c)
			require.Equal(t, int64(-1), ctx.n.Load(), "training went on after its context was done")
		})
	}
}
