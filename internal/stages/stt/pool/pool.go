// Package pool keeps a fixed number of expensive, reusable resources (the
// recogniser's decoders), built and warmed up front, handed out one at a
// time and reset in the background before reuse.
package pool

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"

	"github.com/voiced/voiced/internal/pipeline"
)

// ErrClosed is returned by Acquire after Close.
var ErrClosed = errors.New("pool: closed")

// ErrDiscard, wrapped in the error a Reset returns, says the resource is
// sound but replacing it costs less than resetting it (a decoder whose
// abandoned utterance is long: ending it runs its whole final pass). The
// pool destroys and rebuilds it as it does a resource whose reset failed,
// as an expected path: counted apart from failures, not logged as one.
var ErrDiscard = errors.New("pool: discarded rather than reset")

// Funcs are the operations on the pooled resources.
type Funcs[T any] struct {
	// Build makes one resource. Builds run in parallel (Workers at a time).
	Build func(ctx context.Context) (T, error)
	// Reset makes a used resource ready for the next user. It runs on the
	// pool's own goroutine, so the user releasing it need not wait. A
	// resource whose Reset fails, or reports ErrDiscard, is destroyed and
	// rebuilt (the rebuild retried, backing off, until it succeeds or the
	// pool closes). ctx ends when Close stops the pool: a Reset that waits
	// (for a CPU, say) must give up then, or Close would wait for it past
	// its own context.
	Reset func(ctx context.Context, v T) error
	// Destroy frees a resource.
	Destroy func(T)
}

// Config sizes a pool.
type Config struct {
	Size int // number of resources, >= 1
	// Workers is how many resources are built at once (default 1).
	Workers int
	// MaxWait bounds how long Acquire waits for a free resource even if
	// its context allows longer (0: only the context bounds it).
	MaxWait time.Duration
	// Name labels the pool's metrics (e.g. "sphinx").
	Name string
}

// Pool hands out resources of type T.
type Pool[T any] struct {
	cfg   Config
	fn    Funcs[T]
	log   *slog.Logger
	free  chan T
	dirty chan T

	mu     sync.Mutex
	closed bool
	out    int           // resources handed out and not yet released, and callers waiting for one
	handed int           // resources handed out and not yet released: the in-use gauge
	idle   chan struct{} // closed when out drops to 0 after Close
	// closing is closed by Close: rebuilds still being retried give up.
	closing chan struct{}

	stop   context.CancelFunc
	wg     sync.WaitGroup
	failed int // resources lost to failed resets and rebuilds

	inUse      prometheus.Gauge
	waits      prometheus.Histogram
	overloaded prometheus.Counter
	rebuilds   prometheus.Counter
	discards   prometheus.Counter
}

// New builds cfg.Size resources, returning once all are ready (or the first
// error, after destroying those already built).
func New[T any](ctx context.Context, cfg Config, fn Funcs[T], log *slog.Logger, reg prometheus.Registerer) (*Pool[T], error) {
	if cfg.Size < 1 {
		return nil, fmt.Errorf("pool: size %d, want >= 1", cfg.Size)
	}
	cfg.Workers = max(1, min(cfg.Workers, cfg.Size))
	labels := prometheus.Labels{"pool": cfg.Name}
	p := &Pool[T]{
		cfg: cfg, fn: fn, log: log,
		free:    make(chan T, cfg.Size),
		dirty:   make(chan T, cfg.Size),
		closing: make(chan struct{}),
		inUse: prometheus.NewGauge(prometheus.GaugeOpts{Name: "voiced_stt_decoders_in_use",
			Help: "Decoders handed out to utterances.", ConstLabels: labels}),
		waits: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "voiced_stt_decoder_wait_seconds",
			Help: "Time waited for a free decoder.", ConstLabels: labels,
			Buckets: []float64{.0001, .001, .005, .01, .025, .05, .1, .25, .5, 1}}),
		overloaded: prometheus.NewCounter(prometheus.CounterOpts{Name: "voiced_stt_decoder_overloaded_total",
			Help: "Utterances refused because no decoder was free in time.", ConstLabels: labels}),
		rebuilds: prometheus.NewCounter(prometheus.CounterOpts{Name: "voiced_stt_decoder_rebuilds_total",
			Help: "Decoders destroyed and rebuilt after a failed reset.", ConstLabels: labels}),
		discards: prometheus.NewCounter(prometheus.CounterOpts{Name: "voiced_stt_decoder_discards_total",
			Help: "Decoders destroyed and rebuilt instead of reset, because a new one costs less CPU than ending a long abandoned utterance.", ConstLabels: labels}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{p.inUse, p.waits, p.overloaded, p.rebuilds, p.discards} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("pool: register metrics: %w", err)
			}
		}
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(cfg.Workers)
	built := make(chan T, cfg.Size)
	for range cfg.Size {
		g.Go(func() error {
			v, err := fn.Build(gctx)
			if err != nil {
				return err
			}
			built <- v
			return nil
		})
	}
	err := g.Wait()
	close(built)
	if err != nil {
		for v := range built {
			fn.Destroy(v)
		}
		return nil, fmt.Errorf("pool: build: %w", err)
	}
	for v := range built {
		p.free <- v
	}
	cctx, cancel := context.WithCancel(context.Background())
	p.stop = cancel
	p.wg.Add(1)
	go p.cleaner(cctx)
	return p, nil
}

// cleaner resets released resources and puts them back in the free list.
func (p *Pool[T]) cleaner(ctx context.Context) {
	defer p.wg.Done()
	for {
		select {
		case <-ctx.Done():
			return
		case v := <-p.dirty:
			p.recycle(ctx, v)
		}
	}
}

func (p *Pool[T]) recycle(ctx context.Context, v T) {
	err := p.fn.Reset(ctx, v)
	if err == nil {
		p.put(v)
		return
	}
	if ctx.Err() != nil {
		// The pool is closing: the resource goes, nothing is rebuilt.
		p.fn.Destroy(v)
		p.mu.Lock()
		p.released(true)
		p.mu.Unlock()
		return
	}
	if errors.Is(err, ErrDiscard) {
		p.log.Debug("stt decoder discarded; rebuilding", "pool", p.cfg.Name, "reason", err)
		p.discards.Inc()
	} else {
		p.log.Warn("stt decoder reset failed; rebuilding", "pool", p.cfg.Name, "err", err)
		p.rebuilds.Inc()
	}
	p.fn.Destroy(v)
	nv, err := p.fn.Build(ctx)
	if err != nil && p.shuttingDown(ctx) {
		// Cut short by Close (its deadline cancels ctx): not a failure,
		// and there is nothing to retry for.
		p.log.Debug("stt decoder rebuild stopped: the pool is closing", "pool", p.cfg.Name, "err", err)
		p.mu.Lock()
		p.failed++
		p.released(true)
		p.mu.Unlock()
		return
	}
	if err != nil {
		// Retried in the background, so that a transient failure does
		// not shrink the pool for good; the slot stays counted as out
		// until the rebuild succeeds or the pool closes.
		p.log.Error("stt decoder rebuild failed; retrying", "pool", p.cfg.Name, "err", err)
		p.wg.Add(1)
		go p.rebuild(ctx)
		return
	}
	p.put(nv)
}

// Rebuild retries back off from rebuildFirst to rebuildMax.
const (
	rebuildFirst = time.Second
	rebuildMax   = 30 * time.Second
)

// rebuild retries building a resource lost to a reset and a failed rebuild
// until it succeeds, or gives the slot up when the pool closes.
func (p *Pool[T]) rebuild(ctx context.Context) {
	defer p.wg.Done()
	t := time.NewTimer(rebuildFirst)
	defer t.Stop()
	for delay := rebuildFirst; ; delay = min(2*delay, rebuildMax) {
		select {
		case <-t.C:
		case <-ctx.Done():
		case <-p.closing:
		}
		if !p.shuttingDown(ctx) {
			nv, err := p.fn.Build(ctx)
			if err == nil {
				p.put(nv)
				return
			}
			if !p.shuttingDown(ctx) {
				p.log.Error("stt decoder rebuild failed; retrying", "pool", p.cfg.Name, "err", err, "in", delay)
				t.Reset(delay)
				continue
			}
			// Cut short by Close: the slot is given up below.
		}
		p.mu.Lock()
		p.failed++
		p.released(true)
		p.mu.Unlock()
		return
	}
}

// shuttingDown reports whether the pool is closing: Close has begun, or
// has stopped the cleaner (ctx, its context).
func (p *Pool[T]) shuttingDown(ctx context.Context) bool {
	return ctx.Err() != nil || closed(p.closing)
}

// closed reports whether ch is closed.
func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// put returns a clean resource to the free list.
func (p *Pool[T]) put(v T) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.free <- v // never blocks: at most Size resources exist
	p.released(true)
}

// released accounts for one resource coming back (handed) or a caller
// that gave up waiting for one; p.mu is held.
func (p *Pool[T]) released(handed bool) {
	p.out--
	if handed {
		p.handed--
		p.inUse.Set(float64(p.handed))
	}
	if p.closed && p.out == 0 {
		close(p.idle)
	}
}

// Acquire takes a free resource, waiting no longer than ctx and MaxWait
// allow. When none can be had in time the error wraps
// pipeline.ErrNoRecognizer; when ctx was cancelled it is ctx's error.
func (p *Pool[T]) Acquire(ctx context.Context) (T, error) {
	var zero T
	start := time.Now()
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return zero, ErrClosed
	}
	// Count the resource as out before taking it, so Close waits for it.
	p.out++
	p.mu.Unlock()
	var v T
	select {
	case v = <-p.free:
	default:
		// Only a caller that has to wait pays for the MaxWait timer.
		wctx := ctx
		if p.cfg.MaxWait > 0 {
			var cancel context.CancelFunc
			wctx, cancel = context.WithTimeout(ctx, p.cfg.MaxWait)
			defer cancel()
		}
		select {
		case v = <-p.free:
		case <-wctx.Done():
			p.mu.Lock()
			p.released(false)
			p.mu.Unlock()
			if errors.Is(ctx.Err(), context.Canceled) {
				return zero, ctx.Err()
			}
			p.overloaded.Inc()
			return zero, fmt.Errorf("no free decoder within %v: %w", time.Since(start).Round(time.Millisecond), pipeline.ErrNoRecognizer)
		}
	}
	p.waits.Observe(time.Since(start).Seconds())
	p.mu.Lock()
	p.handed++
	p.inUse.Set(float64(p.handed))
	p.mu.Unlock()
	return v, nil
}

// TryAcquire takes a free resource without waiting, and only while more
// than reserve are free: for optional work that may use an idle resource
// but must not take one that a caller of Acquire would then wait for.
func (p *Pool[T]) TryAcquire(reserve int) (T, bool) {
	var zero T
	p.mu.Lock()
	defer p.mu.Unlock()
	// Acquire takes from the free list without p.mu, so the count may
	// fall before the receive: the receive does not wait either way.
	if p.closed || len(p.free) <= reserve {
		return zero, false
	}
	select {
	case v := <-p.free:
		p.out++
		p.handed++
		p.inUse.Set(float64(p.handed))
		return v, true
	default:
		return zero, false
	}
}

// Release gives a resource back. If clean is false it is reset (on the
// pool's goroutine) before reuse. Release never blocks.
func (p *Pool[T]) Release(v T, clean bool) {
	if clean {
		p.put(v)
		return
	}
	p.dirty <- v // never blocks: the channel holds Size
}

// Size is the number of resources the pool was built with.
func (p *Pool[T]) Size() int { return p.cfg.Size }

// Close waits until every resource handed out has been released (or ctx
// ends), stops the cleaner and destroys the resources. Resources still out
// when ctx ends are leaked rather than freed under their user.
func (p *Pool[T]) Close(ctx context.Context) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	close(p.closing)
	p.idle = make(chan struct{})
	if p.out == 0 {
		close(p.idle)
	}
	p.mu.Unlock()
	var err error
	select {
	case <-p.idle:
	case <-ctx.Done():
		err = fmt.Errorf("pool: closing with decoders still in use: %w", ctx.Err())
	}
	p.stop()
	p.wg.Wait()
	// Resources released but not yet reset are destroyed as they are.
	for {
		select {
		case v := <-p.free:
			p.fn.Destroy(v)
		case v := <-p.dirty:
			p.fn.Destroy(v)
		default:
			return err
		}
	}
}
