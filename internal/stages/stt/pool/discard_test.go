package pool

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
)

// A resource whose Reset reports ErrDiscard (a decoder whose abandoned
// utterance costs more to end than a new decoder) is destroyed and
// rebuilt as an expected path: counted as a discard, not as a failed
// reset, nothing logged at warn level, and the pool keeps its size. A
// rebuild that fails is retried, as after a failed reset.
func TestDiscardedResourceRebuilt(t *testing.T) {
	for _, tc := range []struct {
		name      string
		failBuild bool // the first rebuild fails
	}{
		{"rebuilt", false},
		{"rebuild retried", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := &fake{discardReset: true}
				fn := f.funcs()
				build, calls := fn.Build, 0
				fn.Build = func(ctx context.Context) (*res, error) {
					calls++ // calls 1 and 2: New's
					if tc.failBuild && calls == 3 {
						return nil, errors.New("transient")
					}
					return build(ctx)
				}
				var logs bytes.Buffer
				log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
				p, err := New(t.Context(), Config{Size: 2, Name: "t"}, fn, log, prometheus.NewRegistry())
				require.NoError(t, err)
				ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
				defer cancel()

				r, err := p.Acquire(ctx)
				require.NoError(t, err)
				p.Release(r, false)
				synctest.Wait()
				require.True(t, r.destroyed)

				// Both slots can be had at once: the discarded one came back.
				a, err := p.Acquire(ctx)
				require.NoError(t, err)
				b, err := p.Acquire(ctx)
				require.NoError(t, err)
				require.NotSame(t, r, a)
				require.NotSame(t, r, b)
				require.Equal(t, 2.0, testutil.ToFloat64(p.inUse))
				require.Equal(t, 1.0, testutil.ToFloat64(p.discards))
				require.Equal(t, 0.0, testutil.ToFloat64(p.rebuilds), "a discard is no failed reset")
				p.Release(a, true)
				p.Release(b, true)
				require.NoError(t, p.Close(ctx))
				f.allDestroyed(t)
				require.Len(t, f.built, 3)
				require.Contains(t, logs.String(), "level=DEBUG msg=\"stt decoder discarded; rebuilding\"")
				require.NotContains(t, logs.String(), "level=WARN")
			})
		})
	}
}
