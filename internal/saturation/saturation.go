// Package saturation tells when the process runs too late to take on more
// work. It watches how long goroutines wait to run (the Go scheduler's
// /sched/latencies:seconds histogram, and how late its own ticker fires,
// which is what Node calls event-loop lag) and reports the process
// saturated while that delay is over a threshold and the process itself
// keeps its CPUs busy. The server refuses new requests and sessions while
// it is saturated, so that the work it has accepted keeps its deadlines
// instead of everything running late.
//
// Refusing every new request while saturated would make the server swing
// between all and nothing: the requests in flight end, the process goes
// idle, the saturation clears after Hold, and every waiting client starts
// at once. So while it sheds, the monitor also keeps a limit on the
// requests in flight server-wide, as TCP keeps its congestion window
// (additive increase, multiplicative decrease): each sample over the
// threshold sets it to 90% of the requests then in flight, each calm
// sample raises it by a twentieth while the process still counts as
// saturated and doubles it once that has cleared (as TCP's slow start,
// so that a short episode does not hold the server back for long), and it
// is lifted once it no longer binds. New requests within the limit are taken even while the process
// counts as saturated, so it keeps serving about what it can carry
// (AdmitRequest); new sessions still wait for the saturation to clear.
//
// The second condition matters on a shared machine: other processes can
// delay an idle server's goroutines too, and refusing all work then would
// fail requests that it could serve. Shedding is for load the server
// itself has taken on. But a server starved by other processes gets
// little CPU however much work it has accepted (a server-turn session
// streams 50 frames a second whether or not anyone speaks), and judged by
// the CPU it got alone it would never shed while its accepted requests
// ran late. So a process that has work of its own (its goroutines are
// woken often: StarvedWakeups a second, as a server streaming tens of
// sessions is) counts as saturated too, at a higher delay
// (StarvedThreshold), whatever CPU it got: an idle server is woken rarely,
// and a lightly loaded one on a busy machine is delayed by milliseconds,
// which its margins absorb, not by the tenths of a second that starvation
// brings. (The CPU the process waited for, from the kernel's run-queue
// statistics, does not tell: an idle process's threads wake often for a
// few microseconds each, and on a starved CPU each wake-up waits long.)
package saturation

import (
	"context"
	"math"
	"runtime"
	"runtime/metrics"
	"slices"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Config sets the monitor. The zero value means the defaults documented on
// each field.
type Config struct {
	// Threshold is the scheduling delay above which the process counts as
	// saturated: the 99th percentile of the time goroutines waited to run
	// over the last Interval, or how late the monitor's own tick fired,
	// whichever is larger. Default 10 ms; negative turns shedding off
	// (the delay is still measured and exported).
	Threshold time.Duration
	// Interval is how often the delay is sampled. Default 100 ms.
	Interval time.Duration
	// Hold is how long the delay must stay under half the threshold before
	// a saturated process takes work again, so that it does not flap.
	// Default 1 s.
	Hold time.Duration
	// MinBusy is the share of the CPUs the process may use (GOMAXPROCS:
	// the machine's, or its container's CPU limit) it must have used over
	// the interval (its own user and system time, cgo included)
	// for a delay over Threshold to count as saturation. Default 0.5;
	// negative means any.
	MinBusy float64
	// StarvedThreshold is the delay above which a process that used less
	// than MinBusy but has work (StarvedWakeups) counts as saturated:
	// starved of CPU by other processes while it has work. Default 4
	// times Threshold; negative: never.
	StarvedThreshold time.Duration
	// StarvedWakeups is how often, per second, the process's goroutines
	// must have been woken (the scheduler's latency samples, which the
	// runtime takes of about one wake-up in eight) for it to count as
	// having work. Default 100 (voiced streaming ten real-time sessions
	// samples about 100; an idle one 0-10).
	StarvedWakeups float64
	// MinLimit is the least the limit on requests in flight goes down to
	// while saturated, so that a starved process still makes progress.
	// Default 2.
	MinLimit int
	// LagWindow is how long Lag remembers a delay: it is the largest
	// sample of the last LagWindow. Default 2 s.
	LagWindow time.Duration
}

func (c Config) withDefaults() Config {
	if c.Threshold == 0 {
		c.Threshold = 10 * time.Millisecond
	}
	if c.Interval == 0 {
		c.Interval = 100 * time.Millisecond
	}
	if c.Hold == 0 {
		c.Hold = time.Second
	}
	if c.MinBusy == 0 {
		c.MinBusy = 0.5
	}
	if c.StarvedThreshold == 0 {
		c.StarvedThreshold = 4 * c.Threshold
	}
	if c.StarvedWakeups == 0 {
		c.StarvedWakeups = 100
	}
	if c.MinLimit == 0 {
		c.MinLimit = 2
	}
	if c.LagWindow <= 0 {
		c.LagWindow = 2 * time.Second
	}
	return c
}

// Monitor measures the scheduling delay and says whether the process is
// saturated. Its methods are safe for concurrent use; Run is its one
// goroutine.
type Monitor struct {
	cfg   Config
	delay atomic.Int64 // the last sample's delay, nanoseconds
	lag   atomic.Int64 // the largest delay of the last LagWindow, nanoseconds
	// recent are the delays of the last LagWindow's samples, a ring; only
	// Run's goroutine touches it.
	recent    []time.Duration
	next      int
	busy      atomic.Uint64 // the last sample's CPU share, math.Float64bits
	saturated atomic.Bool
	// overScale is the scale of the strictest rule the current episode
	// went over (1: Threshold, its own load; less: StarvedThreshold); 0
	// while not saturated. Only Run's goroutine touches it.
	overScale float64
	// limit is the most requests in flight while shedding; 0: none. Only
	// Run's goroutine writes it.
	limit    atomic.Int64
	inFlight func() int // set by TrackRequests before Run
	// ticks gives Run its ticks, each the time it was due: a
	// time.Ticker's (tests drive Run with late ticks of their own).
	ticks func(d time.Duration) (c <-chan time.Time, stop func())

	delayGauge   prometheus.Gauge
	lagGauge     prometheus.Gauge
	limitGauge   prometheus.Gauge
	wakeupsGauge prometheus.Gauge
	satGauge     prometheus.Gauge
	transitions  prometheus.Counter
}

// New returns a monitor; its metrics are registered on reg when reg is
// not nil. Nothing is measured until Run.
func New(cfg Config, reg prometheus.Registerer) *Monitor {
	cfg = cfg.withDefaults()
	m := &Monitor{
		cfg: cfg,
		ticks: func(d time.Duration) (<-chan time.Time, func()) {
			t := time.NewTicker(d)
			return t.C, t.Stop
		},
		recent: make([]time.Duration, max(1, int(cfg.LagWindow/cfg.Interval))),
		delayGauge: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "voiced", Name: "sched_delay_seconds",
			Help: "How late goroutines ran over the last sample interval: the 99th percentile of the " +
				"scheduler's runnable-to-running latency, or the monitor's own tick lateness if larger.",
		}),
		lagGauge: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "voiced", Name: "sched_lag_seconds",
			Help: "The largest scheduling delay of the last few seconds (-shed.lag-window): what a request " +
				"keeps back, twice over, for its terminal message to leave before its deadline.",
		}),
		wakeupsGauge: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "voiced", Name: "sched_wakeups_per_second",
			Help: "Goroutine wake-ups the scheduler sampled per second over the last sample interval (the runtime " +
				"samples about one in eight): how much work the process has, whatever CPU it gets.",
		}),
		satGauge: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "voiced", Name: "saturated",
			Help: "1 from a scheduling delay over -shed.threshold until it has stayed under half of it for a second: " +
				"new sessions are refused, and new requests past voiced_request_limit.",
		}),
		limitGauge: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "voiced", Name: "request_limit",
			Help: "The most requests in flight the server takes while it sheds load (0: no limit): 90% of those in " +
				"flight at each sample over -shed.threshold, raised at each calm one (by a twentieth while saturated, doubled after), lifted once it no longer binds.",
		}),
		transitions: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "voiced", Name: "saturation_episodes_total",
			Help: "Times the process became saturated.",
		}),
	}
	if reg != nil {
		reg.MustRegister(m.delayGauge, m.lagGauge, m.wakeupsGauge, m.satGauge, m.limitGauge, m.transitions)
	}
	return m
}

// Saturated reports whether new work should be refused. A nil monitor is
// never saturated.
func (m *Monitor) Saturated() bool { return m != nil && m.saturated.Load() }

// TrackRequests gives the monitor the count of requests in flight, which
// its limit follows (see the package comment). Call it before Run; without
// it, every new request is refused while saturated.
func (m *Monitor) TrackRequests(inFlight func() int) { m.inFlight = inFlight }

// AdmitRequest reports whether a new request may start when inFlight
// requests are already running: always when not shedding, and within the
// limit while shedding. A nil monitor admits everything.
func (m *Monitor) AdmitRequest(inFlight int) bool {
	if m == nil {
		return true
	}
	if l := m.limit.Load(); l > 0 {
		return int64(inFlight) < l
	}
	return !m.saturated.Load()
}

// Limit returns the limit on requests in flight; 0 means none.
func (m *Monitor) Limit() int { return int(m.limit.Load()) }

// Delay returns the last measured scheduling delay.
func (m *Monitor) Delay() time.Duration { return time.Duration(m.delay.Load()) }

// Lag returns the largest scheduling delay of the last LagWindow: how late
// the process has recently run at worst, whatever the cause (its own load
// or other processes). A nil monitor has none.
//
// It is what a deadline needs, where Delay is what shedding needs: a
// request's terminal message is written by goroutines that wait to run as
// long as any, so a process that ran 80 ms late a second ago must start
// answering that much earlier to answer in time, even if the last sample
// happened to be calm.
func (m *Monitor) Lag() time.Duration {
	if m == nil {
		return 0
	}
	return time.Duration(m.lag.Load())
}

// Busy returns the share of the CPUs it may use (GOMAXPROCS) the process
// used over the last interval.
func (m *Monitor) Busy() float64 { return math.Float64frombits(m.busy.Load()) }

// Run samples until ctx ends.
func (m *Monitor) Run(ctx context.Context) {
	s := newSampler()
	cpu := newCPUMeter()
	ticks, stop := m.ticks(m.cfg.Interval)
	defer stop()
	prev := time.Now()
	var calmSince time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case due := <-ticks:
			// The tick carries the time it was due (Go 1.23's timers):
			// how late this goroutine got to run, measured from the
			// ticker's own schedule. Measured from the last tick's
			// arrival instead, a steady lateness would read as none.
			now := time.Now()
			late := max(now.Sub(due), 0)
			p99, wakeups := s.p99()
			// The wake-ups are those since the last sample, which a starved
			// process takes late: a rate over the nominal interval would
			// read several times too high exactly then.
			rate := wakeups / now.Sub(prev).Seconds()
			prev = now
			calmSince = m.observe(max(late, p99), cpu.busy(now), rate, now, calmSince)
		}
	}
}

// observe records one sample and moves the saturated state: on at once
// when the delay is over the threshold while the process is busy (used
// MinBusy of the CPUs), or over StarvedThreshold while it has work (its
// goroutines were woken wakeups times a second); off after Hold under half
// the threshold it went over (or idle). It returns when the current calm spell began
// (zero if not calm).
func (m *Monitor) observe(delay time.Duration, busy, wakeups float64, now, calmSince time.Time) time.Time {
	m.delay.Store(int64(delay))
	m.busy.Store(math.Float64bits(busy))
	m.delayGauge.Set(delay.Seconds())
	m.remember(delay)
	m.wakeupsGauge.Set(wakeups)
	if m.cfg.Threshold < 0 {
		return time.Time{}
	}
	scale := 0.0 // not this process's doing
	switch {
	case busy >= m.cfg.MinBusy: // its own load
		scale = 1
	case wakeups >= m.cfg.StarvedWakeups && m.cfg.StarvedThreshold > 0:
		// Starved while it has work: saturated past StarvedThreshold,
		// calm again under half of it, as a busy process is against
		// Threshold (so that it does not flap): the delay is put on
		// Threshold's scale.
		scale = float64(m.cfg.Threshold) / float64(m.cfg.StarvedThreshold)
	}
	if scale > 0 && m.saturated.Load() {
		// Calm is judged against the threshold it went over: shedding
		// lowers the CPU share of a process saturated by its own load,
		// and the starved rule's four times higher bar would read its
		// delay as calm while it is still over Threshold.
		scale = max(scale, m.overScale)
	}
	delay = time.Duration(float64(delay) * scale)
	calmSince = m.transition(delay, now, calmSince)
	switch {
	case !m.saturated.Load():
		m.overScale = 0
	case delay > m.cfg.Threshold:
		m.overScale = max(m.overScale, scale)
	}
	m.adjustLimit(delay)
	return calmSince
}

// remember adds one sample's delay to the window Lag looks at.
func (m *Monitor) remember(delay time.Duration) {
	m.recent[m.next] = delay
	m.next = (m.next + 1) % len(m.recent)
	lag := slices.Max(m.recent)
	m.lag.Store(int64(lag))
	m.lagGauge.Set(lag.Seconds())
}

// transition moves the saturated state by one sample's delay, already on
// Threshold's scale, and returns when the current calm spell began.
func (m *Monitor) transition(delay time.Duration, now, calmSince time.Time) time.Time {
	switch {
	case delay > m.cfg.Threshold:
		if !m.saturated.Swap(true) {
			m.transitions.Inc()
			m.satGauge.Set(1)
		}
		return time.Time{}
	case delay > m.cfg.Threshold/2:
		return time.Time{}
	case calmSince.IsZero():
		calmSince = now
	}
	if m.saturated.Load() && now.Sub(calmSince) >= m.cfg.Hold {
		m.saturated.Store(false)
		m.satGauge.Set(0)
	}
	return calmSince
}

// adjustLimit moves the limit on requests in flight by one sample's delay
// (already on Threshold's scale): down to 90% of what runs when it is over
// the threshold; when it is under half of it, up by a twentieth while the
// process still counts as saturated and twice as high once that has
// cleared; away once it is more than twice what runs and the process is
// not saturated.
func (m *Monitor) adjustLimit(delay time.Duration) {
	if m.inFlight == nil {
		return
	}
	n := int64(m.inFlight())
	l := m.limit.Load()
	switch {
	case delay > m.cfg.Threshold:
		if l == 0 || l > n {
			l = n
		}
		l = max(int64(m.cfg.MinLimit), l*9/10)
	case l == 0:
		return
	case !m.saturated.Load() && l > 2*n:
		l = 0
	case delay > m.cfg.Threshold/2:
	case m.saturated.Load():
		l += max(1, l/20) // probing while it still counts as saturated
	default:
		l *= 2 // calm for Hold: back to what it carried, quickly
	}
	m.limit.Store(l)
	m.limitGauge.Set(float64(l))
}

// sampler reads the scheduler's latency histogram and gives the 99th
// percentile of what was added since the previous read, and how many
// samples were added.
type sampler struct {
	sample []metrics.Sample
	prev   []uint64
}

const schedLatencies = "/sched/latencies:seconds"

func newSampler() *sampler {
	return &sampler{sample: []metrics.Sample{{Name: schedLatencies}}}
}

func (s *sampler) p99() (time.Duration, float64) {
	metrics.Read(s.sample)
	if s.sample[0].Value.Kind() != metrics.KindFloat64Histogram {
		return 0, 0 // not supported by this runtime
	}
	h := s.sample[0].Value.Float64Histogram()
	if s.prev == nil {
		s.prev = make([]uint64, len(h.Counts))
		copy(s.prev, h.Counts)
		return 0, 0
	}
	var total uint64
	for i, c := range h.Counts {
		total += c - s.prev[i]
	}
	if total == 0 {
		return 0, 0
	}
	rank := uint64(math.Ceil(float64(total) * 0.99))
	var seen uint64
	var p time.Duration
	for i, c := range h.Counts {
		seen += c - s.prev[i]
		if seen >= rank {
			// The bucket's upper bound; the last one's is +Inf, so
			// take its lower bound.
			ub := h.Buckets[i+1]
			if math.IsInf(ub, 1) {
				ub = h.Buckets[i]
			}
			p = time.Duration(ub * float64(time.Second))
			break
		}
	}
	copy(s.prev, h.Counts)
	return p, float64(total)
}

// cpuMeter measures the process's CPU use (every thread's user and system
// time, so cgo engines count) as a share of the CPUs it may use
// (usableCPUs).
type cpuMeter struct {
	lastCPU  time.Duration
	lastWall time.Time
}

func newCPUMeter() *cpuMeter {
	return &cpuMeter{lastCPU: processCPU(), lastWall: time.Now()}
}

// usableCPUs is how many CPUs the process may use: GOMAXPROCS, which the
// runtime sets to a container's CPU limit (and follows when it changes)
// and an operator may set lower, at most the machine's. Counted against
// the machine's CPUs, a process limited to 2 of a 16-CPU node could never
// reach MinBusy.
func usableCPUs() int { return min(runtime.GOMAXPROCS(0), runtime.NumCPU()) }

// busy returns the share of the usable CPUs used since the previous call.
func (c *cpuMeter) busy(now time.Time) float64 {
	cpu := processCPU()
	wall := now.Sub(c.lastWall)
	used := cpu - c.lastCPU
	c.lastCPU, c.lastWall = cpu, now
	if wall <= 0 {
		return 0
	}
	return used.Seconds() / wall.Seconds() / float64(usableCPUs())
}
