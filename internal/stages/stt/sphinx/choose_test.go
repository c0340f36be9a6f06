package sphinx

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
)

// The second model's transcript is kept only when its posterior is
// higher than the first's by more than the margin, it recognised
// something, and its final pass ended in time; anything else keeps the
// first's, and each outcome is counted.
func TestChooseSecond(t *testing.T) {
	first := endResult{text: "where is my order", prob: -4}
	for _, tc := range []struct {
		name   string
		second *endResult // nil: its final pass never ends
		cancel bool       // the utterance's context ends while waiting
		want   string
		count  string
	}{
		// Per word: the first is -1 a word, the margin 0.25.
		{"surer by more than the margin", &endResult{text: "where is my parcel", prob: -2.8}, false, "where is my parcel", "chosen"},
		{"surer by the margin exactly", &endResult{text: "where is my parcel", prob: -3}, false, "where is my order", "kept"},
		{"surer by less", &endResult{text: "where is my parcel", prob: -3.5}, false, "where is my order", "kept"},
		{"longer, less sure in all, surer per word", &endResult{text: "where is my parcel right now", prob: -4.2}, false, "where is my parcel right now", "chosen"},
		{"shorter, surer in all, less sure per word", &endResult{text: "where", prob: -3.5}, false, "where is my order", "kept"},
		{"less sure", &endResult{text: "where is my parcel", prob: -9}, false, "where is my order", "kept"},
		{"sure of nothing", &endResult{text: " ", prob: 0}, false, "where is my order", "kept"},
		{"failed", &endResult{err: errors.New("sphinx: cannot end utterance"), prob: 0}, false, "where is my order", "failed"},
		{"late", nil, false, "where is my order", "late"},
		{"cancelled while waiting", nil, true, "where is my order", "late"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := &Engine{cfg: Config{SecondMargin: 0.25}}
				require.NoError(t, e.registerMetrics(nil))
				r := &recognizer{e: e}
				second := make(chan endResult, 1)
				r.endingSecond = second
				if tc.second != nil {
					second <- *tc.second
				}
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				if tc.cancel {
					time.AfterFunc(time.Millisecond, cancel)
				}
				start := time.Now()
				got := r.choose(ctx, first, second, 50*time.Millisecond)
				require.Equal(t, tc.want, got.text)
				require.InDelta(t, 1, testutil.ToFloat64(e.second.WithLabelValues(tc.count)), 0)
				switch {
				case tc.cancel:
					require.Equal(t, time.Millisecond, time.Since(start))
				case tc.second == nil:
					require.Equal(t, 50*time.Millisecond, time.Since(start), "waited as long as the first's pass took")
					require.NotNil(t, r.endingSecond, "Close still waits for the second's pass")
				default:
					require.Zero(t, time.Since(start))
					require.Nil(t, r.endingSecond)
				}
			})
		})
	}
}

// The wait for a late second model is at least secondGrace, and
// Config.SecondWait replaces it.
func TestChooseSecondWait(t *testing.T) {
	for _, tc := range []struct {
		wait, took, want time.Duration
	}{
		{0, time.Millisecond, secondGrace},
		{0, 80 * time.Millisecond, 80 * time.Millisecond},
		{time.Second, time.Millisecond, time.Second},
	} {
		synctest.Test(t, func(t *testing.T) {
			e := &Engine{cfg: Config{SecondMargin: 0.25, SecondWait: tc.wait}}
			require.NoError(t, e.registerMetrics(nil))
			start := time.Now()
			(&recognizer{e: e}).choose(t.Context(), endResult{text: "yes"}, make(chan endResult), tc.took)
			require.Equal(t, tc.want, time.Since(start))
		})
	}
}

// Second models are counted in by one compare-and-swap: utterances that
// reach their windows at once take the CPUs the gate has left and no
// more, and an utterance that starts afterwards preempts exactly one.
// The concurrent callers check the arithmetic under the race detector;
// the old check-then-add would pass them too in nearly every run, since
// its window was a few instructions wide.
func TestReserveSecond(t *testing.T) {
	for _, tc := range []struct {
		name             string
		parallel, active int64
		want             int64
	}{
		{"one CPU left", 2, 1, 1},
		{"two CPUs left", 4, 2, 2},
		{"none left", 2, 2, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := &Engine{cfg: Config{Parallel: int(tc.parallel)}}
			e.active.Store(tc.active)
			const callers = 16
			var got atomic.Int64
			var wg sync.WaitGroup
			start := make(chan struct{})
			for range callers {
				wg.Go(func() {
					<-start
					if e.reserveSecond() {
						got.Add(1)
					}
				})
			}
			close(start)
			wg.Wait()
			require.Equal(t, tc.want, got.Load(), "second models reserved")
			require.Equal(t, tc.want, e.seconds.Load(), "Engine.seconds")
			if tc.want == 0 {
				return
			}
			e.active.Add(1) // an utterance starts: one second model gives way
			require.True(t, e.preempt())
			require.False(t, e.preempt(), "one newcomer preempts one second model")
			require.Equal(t, tc.want-1, e.seconds.Load())
		})
	}
}
