package loadgen

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/voiced/voiced/internal/protocol"
)

// Delays of the cancellation paths, after the final frame: uniform in
// [0, max). They fall mostly inside the STT and LLM stages of a default
// pipeline, where cancellation matters.
const (
	cancelDelayMax     = 400 * time.Millisecond
	replaceDelayMax    = 300 * time.Millisecond
	bargeInDelayMax    = 300 * time.Millisecond
	disconnectDelayMax = 300 * time.Millisecond
	redialBackoff      = time.Second
)

// runner is the state of one Run.
type runner struct {
	cfg  Config
	url  string
	utts []Utterance

	mu        sync.Mutex
	attempts  []*attempt      // guarded by mu
	sessErrs  map[string]int  // guarded by mu
	dialErrs  map[string]int  // guarded by mu
	seedRng   *rand.Rand      // guarded by mu
	connRTTs  []time.Duration // guarded by mu
	resume    resumeCounts    // guarded by mu
	connected atomic.Int64    // sessions open now
	dials     atomic.Int64    // sessions opened in total

	reserved       atomic.Int64
	ended          atomic.Int64
	gone           atomic.Int64 // requests that ended with their connection
	late           atomic.Int64
	caughtUp       atomic.Int64 // terminals read only once a sync made the client catch up
	extraTerminals atomic.Int64
	serverCloses   atomic.Int64
	frames         atomic.Int64
	uttsSent       atomic.Int64 // utterances sent in server-turn streams
	turnsOut       turnOutcome  // what the server's turns made of them; guarded by mu
	dropped        atomic.Int64 // open-loop arrivals with no room
	drops          atomic.Int64 // disconnects we made
}

// Run runs the load test cfg describes: it starts requests until
// cfg.Duration has passed or cfg.Requests were started, waits for every
// started request to end (or its deadline plus grace to pass), and
// returns the report. Cancelling ctx stops the run early; requests still
// in flight are then reported as abandoned, not missing. The error is
// for runs that could not start (bad config, unreachable server).
func Run(ctx context.Context, cfg Config) (Report, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return Report{}, err
	}
	r, err := newRunner(cfg)
	if err != nil {
		return Report{}, err
	}
	// One session first, so that an unreachable or incompatible server
	// is an error rather than a report full of dial failures.
	probe, err := r.dial(ctx)
	if err != nil {
		return Report{}, fmt.Errorf("first session to %s: %w", r.url, err)
	}
	budget, maxBudget := probe.budget, time.Duration(probe.ready.MaxBudgetMs)*time.Millisecond
	probe.close()

	var scr *scraper
	if cfg.MetricsURL != "off" {
		scr = newScraper(cfg.MetricsURL)
		scr.scrape(ctx) // the baseline, before the load
	}

	start := time.Now()
	var bg sync.WaitGroup // progress, scraper and lag probe
	bgCtx, bgStop := context.WithCancel(ctx)
	lag := &lagProbe{}
	bg.Go(func() { lag.loop(bgCtx) })
	if cfg.Progress != nil {
		bg.Go(func() { r.progress(bgCtx, start, scr) })
	}
	if scr != nil {
		bg.Go(func() { scr.loop(bgCtx, cfg.ScrapeEvery) })
	}
	r.runSlots(ctx, scr)
	end := time.Now()
	// The loop's scrapes end first: one still in flight would otherwise
	// land after the final one, and the figures between the first and the
	// last sample would stop at the wrong one.
	bgStop()
	bg.Wait()
	if scr != nil {
		scr.scrape(ctx)
	}
	rep := r.report(start, end, budget, maxBudget, scr, ctx.Err() != nil)
	rep.ClientTimerLag = lag.dist()
	return rep, nil
}

// newRunner makes the run's state and loads its utterances.
func newRunner(cfg Config) (*runner, error) {
	r := &runner{
		cfg:      cfg,
		url:      "ws://" + cfg.Addr + cfg.Path,
		sessErrs: make(map[string]int),
		dialErrs: make(map[string]int),
		seedRng:  rand.New(rand.NewPCG(cfg.Seed, 0x5eed)),
	}
	if len(cfg.WAVs) == 0 {
		r.utts = []Utterance{Synthetic(cfg.Synthetic, cfg.Seed)}
	}
	for _, p := range cfg.WAVs {
		u, err := LoadWAV(p)
		if err != nil {
			return nil, err
		}
		r.utts = append(r.utts, u)
	}
	if cfg.MuLaw || cfg.Turns == TurnsServer {
		// One rate for the whole stream (or μ-law's 8 kHz).
		rate := protocol.DefaultSampleRate
		if cfg.MuLaw {
			rate = protocol.MuLawRate
		}
		utts, err := streamUtterances(r.utts, rate)
		if err != nil {
			return nil, err
		}
		r.utts = utts
	}
	return r, nil
}

// runSlots runs the sessions of the run's mode for its duration and waits
// for them.
func (r *runner) runSlots(ctx context.Context, scr *scraper) {
	cfg := r.cfg
	stopCtx, stop := context.WithTimeout(ctx, cfg.Duration)
	defer stop()
	var slots sync.WaitGroup
	switch {
	case cfg.Idle:
		release := make(chan struct{})
		for range cfg.Sessions {
			slots.Go(func() { r.idleSlot(ctx, stopCtx, release) })
		}
		<-stopCtx.Done()
		if scr != nil {
			scr.scrapeHeld(ctx) // with every idle session still open
		}
		close(release)
	case cfg.Turns == TurnsServer:
		for range cfg.Sessions {
			slots.Go(func() { r.turnsSlot(ctx, stopCtx) })
		}
	default:
		r.runTurns(ctx, stopCtx)
	}
	slots.Wait()
}

// runTurns runs the closed- or open-loop sessions, and closes those still
// open once all have ended.
func (r *runner) runTurns(ctx, stopCtx context.Context) {
	cfg := r.cfg
	last := make([]*conn, cfg.Sessions)
	var slots sync.WaitGroup
	if cfg.Rate > 0 {
		arrivals := make([]chan kind, cfg.Sessions)
		for i := range arrivals {
			arrivals[i] = make(chan kind, 16)
			slots.Go(func() { last[i] = r.openSlot(ctx, arrivals[i], i) })
		}
		r.dispatch(stopCtx, arrivals)
		for _, ch := range arrivals {
			close(ch)
		}
	} else {
		for i := range cfg.Sessions {
			slots.Go(func() { last[i] = r.closedSlot(ctx, stopCtx, i) })
		}
	}
	slots.Wait()
	r.closeAll(last)
}

// ramp is the time over which sessions start their first turns.
func (r *runner) ramp() time.Duration {
	if r.cfg.Ramp > 0 {
		return r.cfg.Ramp
	}
	return r.cfg.Think + r.utts[0].Duration()
}

// closeAll closes the sessions still open at the end of a run, once every
// turn has ended. Closed as each slot finished, a thousand sessions would
// close in the same second while the last requests still run, and their
// closing handshakes (through a proxy, on the machine the server shares)
// would delay those requests' terminals: the run's end is not part of the
// load it measures.
func (r *runner) closeAll(conns []*conn) {
	var wg sync.WaitGroup
	for _, c := range conns {
		if c != nil {
			wg.Go(func() { r.disconnect(c, false) })
		}
	}
	wg.Wait()
}

// rng returns a random source for one goroutine, derived from the seed.
func (r *runner) rng() *rand.Rand {
	r.mu.Lock()
	defer r.mu.Unlock()
	return rand.New(rand.NewPCG(r.seedRng.Uint64(), r.seedRng.Uint64()))
}

// reserve takes n requests from the -requests bound.
func (r *runner) reserve(n int) bool {
	if r.cfg.Requests == 0 {
		r.reserved.Add(int64(n))
		return true
	}
	for {
		cur := r.reserved.Load()
		if cur+int64(n) > int64(r.cfg.Requests) {
			return false
		}
		if r.reserved.CompareAndSwap(cur, cur+int64(n)) {
			return true
		}
	}
}

func (r *runner) record(a *attempt) {
	r.mu.Lock()
	r.attempts = append(r.attempts, a)
	r.mu.Unlock()
}

func (r *runner) sessionError(code string) {
	r.mu.Lock()
	r.sessErrs[code]++
	r.mu.Unlock()
}

// connect dials a session, counting failures; nil when it failed.
func (r *runner) connect(ctx context.Context) *conn {
	c, err := r.dial(ctx)
	if err != nil {
		r.mu.Lock()
		r.dialErrs[err.Error()]++
		r.mu.Unlock()
		r.cfg.Logger.Warn("session failed to open", "err", err)
		return nil
	}
	r.mu.Lock()
	r.connRTTs = append(r.connRTTs, c.rtt)
	r.mu.Unlock()
	r.dials.Add(1)
	r.connected.Add(1)
	return c
}

func (r *runner) disconnect(c *conn, drop bool) {
	if drop {
		c.drop()
		r.drops.Add(1)
	} else {
		c.close()
	}
	r.connected.Add(-1)
}

// sleep waits d or until ctx is done; it reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

func uniform(rng *rand.Rand, max time.Duration) time.Duration {
	if max <= 0 {
		return 0
	}
	return time.Duration(rng.Int64N(int64(max)))
}

// pick chooses a turn's kind from the mix.
func (r *runner) pick(rng *rand.Rand) kind {
	m := r.cfg.Mix
	x := rng.Float64() * 100
	for _, c := range []struct {
		share float64
		k     kind
	}{{m.Cancel, kindCancel}, {m.Replace, kindReplace}, {m.BargeIn, kindBargeIn}, {m.Disconnect, kindDisconnect}} {
		if x < c.share {
			return c.k
		}
		x -= c.share
	}
	return kindPlain
}

// reserveTurn picks a turn's kind and takes its requests from the
// -requests bound; when the bound has no room for a two-request turn it
// falls back to a plain one. ok is false when the bound is used up.
func (r *runner) reserveTurn(rng *rand.Rand) (k kind, ok bool) {
	k = r.pick(rng)
	if r.reserve(requestsOf(k)) {
		return k, true
	}
	return kindPlain, r.reserve(1)
}

// requestsOf is how many requests a turn of kind k opens.
func requestsOf(k kind) int {
	if k == kindReplace || k == kindBargeIn {
		return 2
	}
	return 1
}

// closedSlot is one closed-loop session: turn, think, repeat, re-dialling
// when the connection goes. It returns the session still open, for
// closeAll.
func (r *runner) closedSlot(ctx, stop context.Context, i int) (c *conn) {
	rng := r.rng()
	// Stagger the first turns, so that sessions do not speak in step.
	if !sleep(stop, uniform(rng, r.ramp())) {
		return nil
	}
	seq := 0
	for stop.Err() == nil {
		if c != nil && r.cfg.Resume && !c.awaitSession(stop) && stop.Err() == nil {
			r.gaveUp(c)
			c = nil
		}
		if c != nil && !c.alive() {
			r.disconnect(c, false)
			c = nil
		}
		if c == nil {
			if c = r.connect(ctx); c == nil {
				sleep(stop, redialBackoff)
				continue
			}
		}
		k, ok := r.reserveTurn(rng)
		if !ok {
			return c
		}
		if r.turn(ctx, c, k, fmt.Sprintf("s%d-%d", i, seq), rng) {
			r.connected.Add(-1)
			c = nil
		}
		seq++
		if r.cfg.Think > 0 {
			sleep(stop, r.cfg.Think/2+uniform(rng, r.cfg.Think))
		}
	}
	return c
}

// openSlot is one open-loop session: every arrival runs at once, in its
// own goroutine, on the session's current connection. Once its turns have
// ended it returns the session still open, for closeAll.
func (r *runner) openSlot(ctx context.Context, arrivals <-chan kind, i int) (c *conn) {
	rng := r.rng()
	var (
		turns sync.WaitGroup
		conns []*conn
	)
	defer func() {
		turns.Wait()
		for _, old := range conns {
			if old != c {
				old.close() // already dead; this only waits for its reader
			}
		}
	}()
	seq := 0
	for k := range arrivals {
		if c != nil && !c.alive() {
			r.connected.Add(-1)
			c = nil
		}
		if c == nil {
			if c = r.connect(ctx); c == nil {
				// The arrival is lost with the dial, which is counted;
				// give its requests back to the -requests bound.
				r.reserved.Add(-int64(requestsOf(k)))
				continue
			}
			conns = append(conns, c)
		}
		cc, id, trng := c, fmt.Sprintf("s%d-%d", i, seq), rand.New(rand.NewPCG(rng.Uint64(), rng.Uint64()))
		seq++
		// A turn that drops the connection needs no word back: the next
		// arrival finds it dead through alive.
		turns.Go(func() { r.turn(ctx, cc, k, id, trng) })
	}
	return c
}

// dispatch generates Poisson arrivals at cfg.Rate over the sessions,
// round-robin, until stop or the request bound.
func (r *runner) dispatch(stop context.Context, arrivals []chan kind) {
	rng := r.rng()
	t := time.NewTimer(0)
	defer t.Stop()
	<-t.C
	next := time.Now()
	for n := 0; ; n++ {
		next = next.Add(time.Duration(rng.ExpFloat64() / r.cfg.Rate * float64(time.Second)))
		t.Reset(time.Until(next))
		select {
		case <-stop.Done():
			return
		case <-t.C:
		}
		k, ok := r.reserveTurn(rng)
		if !ok {
			return
		}
		select {
		case arrivals[n%len(arrivals)] <- k:
		default:
			r.dropped.Add(1)
			r.reserved.Add(-int64(requestsOf(k)))
		}
	}
}

// idleSlot opens a session and holds it, sending nothing, until release.
func (r *runner) idleSlot(ctx, stop context.Context, release <-chan struct{}) {
	c := r.connect(ctx)
	for c == nil {
		if !sleep(stop, redialBackoff) {
			return
		}
		c = r.connect(ctx)
	}
	defer r.disconnect(c, false)
	select {
	case <-release:
	case <-ctx.Done():
	}
}

// turn runs one turn of kind k on c. It reports whether it dropped the
// connection.
func (r *runner) turn(ctx context.Context, c *conn, k kind, id string, rng *rand.Rand) (dropped bool) {
	u := r.utts[rng.IntN(len(r.utts))]
	var opened []*attempt
	defer func() {
		for _, a := range opened {
			a.release()
		}
	}()
	open := func(id string) *attempt {
		a := c.open(id, k)
		opened = append(opened, a)
		return a
	}
	switch k {
	case kindPlain:
		a := open(id)
		if c.send(ctx, a, u, 0) == nil {
			c.wait(ctx, a)
		}
	case kindCancel:
		a := open(id)
		if c.send(ctx, a, u, 0) == nil {
			c.pause(ctx, a, uniform(rng, cancelDelayMax))
			if c.cancel(ctx, a) == nil {
				c.wait(ctx, a)
			}
		}
	case kindReplace:
		a := open(id)
		if c.send(ctx, a, u, 0) != nil {
			break
		}
		c.pause(ctx, a, uniform(rng, replaceDelayMax))
		b := open(id)
		if c.send(ctx, b, u, 0) == nil {
			c.wait(ctx, a)
			c.wait(ctx, b)
		}
	case kindBargeIn:
		if c.supersede(ctx, true) != nil {
			break
		}
		a := open(id)
		if c.send(ctx, a, u, 0) == nil {
			c.pause(ctx, a, uniform(rng, bargeInDelayMax))
			b := open(id + "-b")
			if c.send(ctx, b, u, 0) == nil {
				c.wait(ctx, a)
				c.wait(ctx, b)
			}
		}
		_ = c.supersede(ctx, false)
	case kindDisconnect:
		a := open(id)
		frames := len(u.Frames())
		if rng.IntN(2) == 0 && frames > 1 {
			// Mid-utterance: after some frames, before the final one.
			_ = c.send(ctx, a, u, 1+rng.IntN(frames-1))
		} else if c.send(ctx, a, u, 0) == nil {
			c.pause(ctx, a, uniform(rng, disconnectDelayMax))
		}
		r.disconnectDrop(c)
		return true
	}
	return false
}

func (r *runner) disconnectDrop(c *conn) {
	c.drop()
	r.drops.Add(1)
}
