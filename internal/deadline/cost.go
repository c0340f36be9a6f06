package deadline

import (
	"sync"
	"time"
)

// costWindow is how many recent runs a Cost remembers, and costWarm how
// many it needs before its estimate replaces the configured minimum.
const (
	costWindow = 128
	costWarm   = 16
	costFloor  = time.Millisecond // no stage is worth starting with less
	// costMaxAge is how long a run counts. A stage is only measured when
	// it runs, and it does not run while its learned minimum is above the
	// time requests leave it: without an age, a few slow runs (a load
	// spike) would keep a cheap stage skipped for ever on thin budgets,
	// however long ago they were. Once all its runs are this old, the
	// stage is unmeasured again (1 ms) and runs, and is measured afresh;
	// while some are younger, they decide, however few (of fewer than
	// 100 runs the 99th percentile is the slowest): a stage run less than
	// costWarm times a minute keeps what it was measured to cost.
	costMaxAge = time.Minute
)

// Cost learns what a stage costs from the durations of its recent runs:
// their 99th percentile. A stage's configured minimum is a guess made
// before anything ran; once the stage has run, the pipeline lowers the
// minimum to the measured cost (Stage.Learned), so a cheap embedded stage
// (the extractive responder answers in well under a millisecond) is not
// skipped with time enough left for it. The configured minimum stays the
// ceiling: a stage is never asked for more than an operator set. The zero
// value is ready to use and safe for concurrent use.
//
// A percentile of recent runs, not a moving average: a minimum must cover
// nearly every run. Of at most 128 runs the 99th percentile is the largest
// or the second largest, so it is found in one pass over the window, when
// a run was observed since the last call (BenchmarkCostP99), a few times
// per request; sorting the window cost 1-2.5 us each time.
type Cost struct {
	mu    sync.Mutex
	ring  [costWindow]time.Duration
	at    [costWindow]time.Time // when each run was observed
	n     int                   // runs observed, up to costWindow
	next  int                   // where the next run goes
	p99   time.Duration         // cached; recomputed when stale or a run aged out
	live  int                   // runs younger than costMaxAge when p99 was computed
	until time.Time             // when the oldest of those runs ages out
	stale bool
}

// Observe records one run of the stage that took d. A run cut short by
// its budget should be observed with its budget: the stage needed at
// least that.
func (c *Cost) Observe(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ring[c.next] = d
	c.at[c.next] = time.Now()
	c.next = (c.next + 1) % costWindow
	c.n = min(c.n+1, costWindow)
	c.stale = true
}

// P99 returns the 99th percentile of the recent runs (the last
// costWindow, none older than costMaxAge), and false until costWarm runs
// were observed, or when none is younger than costMaxAge.
func (c *Cost) P99() (time.Duration, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n < costWarm {
		return 0, false
	}
	now := time.Now()
	if c.stale || !now.Before(c.until) {
		c.recompute(now)
	}
	if c.live == 0 {
		return 0, false
	}
	return c.p99, true
}

// recompute caches the percentile of the runs younger than costMaxAge
// at now; mu must be held.
func (c *Cost) recompute(now time.Time) {
	c.stale = false
	oldest := 0 // the oldest run in the ring: the next to be overwritten once full
	if c.n == costWindow {
		oldest = c.next
	}
	if at := c.at[oldest]; now.Sub(at) < costMaxAge {
		// The common case: every run is young enough.
		c.live, c.until, c.p99 = c.n, at.Add(costMaxAge), percentile99(c.ring[:c.n])
		return
	}
	var live [costWindow]time.Duration
	k, first := 0, now
	for i := range c.n {
		if at := c.at[i]; now.Sub(at) < costMaxAge {
			live[k] = c.ring[i]
			k++
			if at.Before(first) {
				first = at
			}
		}
	}
	c.live, c.until = k, first.Add(costMaxAge)
	if k > 0 {
		c.p99 = percentile99(live[:k])
	}
}

// rank99 is the nearest rank of the 99th percentile of n runs, from 1:
// the smallest rank with at least 99% of the runs at or below it.
func rank99(n int) int { return (n*99 + 99) / 100 }

// topK is how many of a full window's largest runs lie at or above its
// 99th percentile: costWindow - rank99(costWindow) + 1, spelled out for a
// constant.
const topK = costWindow - (costWindow*99+99)/100 + 1

// percentile99 returns the nearest-rank 99th percentile of runs (at most
// costWindow of them): the k-th largest, with k at most topK, kept in a
// small sorted array during one pass instead of sorting the window.
func percentile99(runs []time.Duration) time.Duration {
	k := len(runs) - rank99(len(runs)) + 1
	var top [topK]time.Duration // the k largest so far, largest first
	for i, d := range runs {
		if i >= k && d <= top[k-1] {
			continue
		}
		j := min(i, k-1) // the slot d may take; those below it move down
		for j > 0 && top[j-1] < d {
			top[j] = top[j-1]
			j--
		}
		top[j] = d
	}
	return top[k-1]
}

// Learned returns the stage with its minimum lowered to the cost learned
// so far, at least a millisecond. Until the stage has run often enough to
// say, the minimum is that millisecond: a stage that was always skipped
// would never be measured, and starting one with too little time cannot
// make the request late (its budget ends before the deadline; it then
// degrades as a timeout instead of as a skip). c may be nil: the stage as
// configured.
func (s Stage) Learned(c *Cost) Stage {
	if c == nil {
		return s
	}
	need := costFloor
	if p, ok := c.P99(); ok {
		need = max(p, costFloor)
	}
	s.Min = min(s.Min, need)
	return s
}
