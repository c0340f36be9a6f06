// Package fleet makes many voiced instances one service: conversations,
// the terminals a dropped connection missed, provider cooldowns and each
// instance's capacity are shared through Redis, and each instance answers
// HAProxy's agent check with its state and free capacity.
//
// Redis is never on a request's critical path for longer than its budget:
// every call has a small deadline (Config.Budget) and is skipped when it
// runs out; writes go through a bounded write-behind queue; cooldowns are
// read from a local copy refreshed in the background. While Redis is away
// an instance keeps serving on local state (voiced_redis_up is 0, and the
// loss and the recovery are logged once each), and it reconnects by
// itself.
package fleet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/voiced/voiced/internal/session"
)

// Config configures the connection to Redis. The zero value means the
// documented defaults (but URL is required).
type Config struct {
	// URL is the Redis URL, e.g. redis://127.0.0.1:6379/0.
	URL string
	// Budget bounds every Redis call; one that runs out is skipped.
	// Default 20ms.
	Budget time.Duration
	// ResumeBudget bounds the reads a resume makes at the upgrade (the
	// conversation's history and its missed terminals) instead of
	// Budget. No request waits on them, and a resume that skips them
	// continues without its history: a burst of resumes (the sessions of
	// a killed or drained instance arriving at once on a busy instance)
	// must not lose conversations to the request path's bound. Default 10
	// times Budget.
	ResumeBudget time.Duration
	// Prefix starts every key. Default "voiced:".
	Prefix string
	// Poll is how often the local copy of shared state (cooldowns) is
	// refreshed, and a lost Redis retried. Default 200ms.
	Poll time.Duration
	// QueueSize bounds the write-behind queue; writes past it are
	// dropped (and counted). Default 1024.
	QueueSize int
}

func (c Config) withDefaults() Config {
	if c.Budget <= 0 {
		c.Budget = 20 * time.Millisecond
	}
	if c.ResumeBudget <= 0 {
		c.ResumeBudget = 10 * c.Budget
	}
	if c.Prefix == "" {
		c.Prefix = "voiced:"
	}
	if c.Poll <= 0 {
		c.Poll = 200 * time.Millisecond
	}
	if c.QueueSize <= 0 {
		c.QueueSize = 1024
	}
	return c
}

// Redis is the connection to the fleet's Redis, with its budget, its
// health and its write-behind queue. Run must be running for writes and
// the background refresh to happen.
type Redis struct {
	cfg    Config
	client *redis.Client
	log    *slog.Logger

	up    atomic.Bool
	fails int // consecutive failed checks; owned by Run
	// checked is closed once the first check has decided whether Redis
	// is up (by Run): an instance is not ready before (cmd/voiced), so
	// that a client resuming in its first milliseconds finds the shared
	// state.
	checked chan struct{}
	upG     prometheus.Gauge
	calls   *prometheus.HistogramVec // by op
	errs    *prometheus.CounterVec   // by op: failed or skipped calls
	queue   chan write
	pollMu  sync.Mutex
	polls   []func(ctx context.Context) error // guarded by pollMu; run each Poll while up
	upkeep  []func(ctx context.Context)       // guarded by pollMu; run after each check that finds Redis up
}

// write is one write-behind operation; fallback, when not nil, runs when
// it cannot be done (Redis away, queue full, the call failed).
type write struct {
	op       string
	do       func(ctx context.Context) error
	fallback func()
}

// errDown is returned for calls skipped because Redis is away; the
// session server tells it by session.ErrStoreUnavailable.
var errDown = fmt.Errorf("redis unavailable: %w", session.ErrStoreUnavailable)

// quiet is go-redis's logger: a dial that fails while Redis is away would
// otherwise be printed on every try; Redis's state is logged here, once
// per change.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

// CheckURL reports whether url is a Redis URL New takes, in New's words,
// so that voiced can refuse it before it starts anything.
func CheckURL(url string) error {
	_, err := parseURL(url)
	return err
}

func parseURL(url string) (*redis.Options, error) {
	opt, err := redis.ParseURL(url)
	if err != nil {
		// Not the parser's words: they quote the URL, or the part of a
		// password an unencoded '/', '#' or '?' made it take for a host,
		// a port or a path.
		return nil, errors.New("-redis: not a valid redis:// or unix:// URL (percent-encode '/', '#', '?' and '@' in a password)")
	}
	return opt, nil
}

// New connects lazily to cfg.URL; metrics are registered on reg (when not
// nil). It silences go-redis's own logger, a process-wide setting.
func New(cfg Config, log *slog.Logger, reg prometheus.Registerer) (*Redis, error) {
	cfg = cfg.withDefaults()
	redis.SetLogger(quiet{})
	opt, err := parseURL(cfg.URL)
	if err != nil {
		return nil, err
	}
	// Bounded by the context, not by go-redis's own multi-second
	// defaults: a stopped server must cost a call its budget, no more.
	// Every call's context has its budget as deadline; these only cap it
	// (at the longer, resume budget).
	opt.ContextTimeoutEnabled = true
	longest := max(cfg.Budget, cfg.ResumeBudget)
	opt.DialTimeout = max(longest, 100*time.Millisecond)
	opt.ReadTimeout = longest
	opt.WriteTimeout = longest
	opt.PoolTimeout = longest
	opt.MaxRetries = -1
	opt.DialerRetries = 1
	opt.DisableIdentity = true
	r := &Redis{
		cfg:    cfg,
		client: redis.NewClient(opt),
		log:    log,
		upG: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "voiced", Name: "redis_up",
			Help: "1 while the fleet's Redis answers within its budget, 0 while it is away (state is then local).",
		}),
		calls: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "voiced", Name: "redis_call_seconds",
			Help: "Duration of Redis calls that answered, by operation.",
			// Up to the longest budget a call may have: a resume's reads
			// (ResumeBudget, 10 x -redis.budget: 200 ms by default), or a
			// budget raised to seconds; slow answers landed in +Inf past
			// 50 ms.
			Buckets: []float64{.0001, .00025, .0005, .001, .002, .005, .01, .02, .05, .1, .2, .5, 1, 2},
		}, []string{"op"}),
		errs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "voiced", Name: "redis_skipped_total",
			Help: "Redis calls that failed, ran out of budget, were dropped from a full queue or skipped while Redis was away, by operation.",
		}, []string{"op"}),
		queue:   make(chan write, cfg.QueueSize),
		checked: make(chan struct{}),
	}
	if reg != nil {
		reg.MustRegister(r.upG, r.calls, r.errs)
	}
	return r, nil
}

// Up reports whether Redis answered the last check.
func (r *Redis) Up() bool { return r.up.Load() }

// Checked is closed once Run's first check has decided whether Redis is
// up: at once when it answers, after one budget when it does not.
func (r *Redis) Checked() <-chan struct{} { return r.checked }

// Budget is the bound of one call.
func (r *Redis) Budget() time.Duration { return r.cfg.Budget }

func (r *Redis) key(parts ...string) string {
	k := r.cfg.Prefix
	for i, p := range parts {
		if i > 0 {
			k += ":"
		}
		k += p
	}
	return k
}

// call runs one Redis operation within the budget, unless Redis is away.
// redis.Nil (no such key) is an answer, not a failure.
func (r *Redis) call(ctx context.Context, op string, do func(ctx context.Context) error) error {
	return r.callWithin(ctx, op, r.cfg.Budget, do)
}

// callWithin is call with the given budget.
func (r *Redis) callWithin(ctx context.Context, op string, budget time.Duration, do func(ctx context.Context) error) error {
	if !r.up.Load() {
		r.errs.WithLabelValues(op).Inc()
		return errDown
	}
	if err := ctx.Err(); err != nil {
		// No time for a call (a resume that takes only what this instance
		// holds): skipped, and Redis has not failed.
		r.errs.WithLabelValues(op).Inc()
		return fmt.Errorf("redis %s: %w: %w", op, session.ErrStoreUnavailable, err)
	}
	ctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	start := time.Now()
	err := do(ctx)
	if err != nil && !errors.Is(err, redis.Nil) {
		r.errs.WithLabelValues(op).Inc()
		// A call past its budget, or one the network failed, is Redis
		// away too, for the session server (which logs the store's loss
		// once, here): a frozen or blackholed Redis answers no call for
		// the checks it takes to be found lost, and resumes meanwhile must
		// not log one line each. An error Redis itself answered (a wrong
		// type, a script error) is a fault to report.
		var ne net.Error
		if ctx.Err() != nil || errors.As(err, &ne) {
			return fmt.Errorf("redis %s: %w: %w", op, session.ErrStoreUnavailable, err)
		}
		return fmt.Errorf("redis %s: %w", op, err)
	}
	r.calls.WithLabelValues(op).Observe(time.Since(start).Seconds())
	return err
}

// enqueue queues a write for the writer; it never blocks.
func (r *Redis) enqueue(w write) {
	if r.up.Load() {
		select {
		case r.queue <- w:
			return
		default:
		}
	}
	r.errs.WithLabelValues(w.op).Inc()
	if w.fallback != nil {
		w.fallback()
	}
}

// addPoll registers a refresh run every Poll while Redis is up.
func (r *Redis) addPoll(f func(ctx context.Context) error) {
	r.pollMu.Lock()
	defer r.pollMu.Unlock()
	r.polls = append(r.polls, f)
}

// addUpkeep registers f, run after every check that finds Redis up (each
// Poll): work that needs Redis but says nothing of its health.
func (r *Redis) addUpkeep(f func(ctx context.Context)) {
	r.pollMu.Lock()
	defer r.pollMu.Unlock()
	r.upkeep = append(r.upkeep, f)
}

// Run runs the writer and the health and refresh loop until ctx ends,
// then writes what is still queued (see flush) and closes the client.
func (r *Redis) Run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Go(func() { r.writer(ctx) })
	r.check(ctx)
	tick := time.NewTicker(r.cfg.Poll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			wg.Wait()
			r.client.Close()
			return
		case <-tick.C:
			r.check(ctx)
		}
	}
}

// check pings a lost Redis, or refreshes the local copies from a live
// one; either tells whether it is up.
func (r *Redis) check(ctx context.Context) {
	var err error
	if !r.up.Load() {
		cctx, cancel := context.WithTimeout(ctx, r.cfg.Budget)
		err = r.client.Ping(cctx).Err()
		cancel()
	} else {
		r.pollMu.Lock()
		polls := r.polls
		r.pollMu.Unlock()
		for _, p := range polls {
			if err = p(ctx); err != nil && !errors.Is(err, redis.Nil) {
				break
			}
			err = nil
		}
		if len(polls) == 0 {
			err = r.call(ctx, "ping", func(ctx context.Context) error { return r.client.Ping(ctx).Err() })
		}
	}
	if ctx.Err() != nil {
		return
	}
	// One slow check on a busy machine is not a lost Redis: it is lost
	// after lostAfter checks in a row fail, and found at the first answer.
	if err != nil {
		r.fails++
		if r.fails < lostAfter && r.up.Load() {
			return
		}
	} else {
		r.fails = 0
	}
	r.setUp(err == nil, err)
	if err == nil {
		r.pollMu.Lock()
		upkeep := r.upkeep
		r.pollMu.Unlock()
		for _, f := range upkeep {
			f(ctx)
		}
	}
}

// lostAfter is how many checks in a row must fail for Redis to be lost.
const lostAfter = 3

// setUp records Redis's health, logging each change once. Only Run calls
// it. The state is stored last: whoever sees Up change finds the change
// logged and exported (voiced_redis_up), and Checked closes after it.
func (r *Redis) setUp(up bool, err error) {
	var first bool
	select {
	case <-r.checked:
	default:
		first = true
	}
	if r.up.Load() == up && !first {
		return
	}
	if up {
		r.log.Info("redis reachable: fleet state shared", "addr", r.client.Options().Addr)
		r.upG.Set(1)
	} else {
		r.log.Warn("redis lost (or not reachable yet): serving on local state; resume across instances unavailable until it returns",
			"addr", r.client.Options().Addr, "err", err)
		r.upG.Set(0)
	}
	r.up.Store(up)
	if first {
		close(r.checked)
	}
}

// writer runs queued writes, each within the budget, and what is still
// queued when ctx ends (flush).
func (r *Redis) writer(ctx context.Context) {
	// Each write is bounded by the budget, not by ctx: one that runs as
	// the instance stops is made, not dropped.
	wctx := context.WithoutCancel(ctx)
	for {
		select {
		case <-ctx.Done():
			r.flush(wctx)
			return
		case w := <-r.queue:
			r.write(wctx, w)
		}
	}
}

// write runs one queued write, and its fallback when it fails.
func (r *Redis) write(ctx context.Context, w write) {
	if err := r.call(ctx, w.op, w.do); err != nil && w.fallback != nil {
		w.fallback()
	}
}

// flushTime bounds the writes flush makes, all together.
const flushTime = time.Second

// flush runs the writes still queued when Run stops, within flushTime:
// the instance stops after its drain, and the terminals its last
// sessions could not send were queued just before, for their resume on
// another instance.
func (r *Redis) flush(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, flushTime)
	defer cancel()
	for {
		select {
		case w := <-r.queue:
			r.write(ctx, w)
		default:
			return
		}
	}
}
