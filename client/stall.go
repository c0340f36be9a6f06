package client

import (
	"sync"
	"time"
)

// stallGuard drops a connection whose writes make no progress for a
// timeout: some write has been waiting that long and none has completed
// meanwhile (a server that stopped reading, a dead link whose send buffer
// filled).
//
// It replaces a context with a timeout per write. coder/websocket watches
// a write's context with context.AfterFunc when it can end, so a
// timeout per write cost a timer, a context and a watcher per message:
// about a tenth of a load test's client CPU, which shares the machine with
// the server it measures. It also kept a caller's context out of the
// write: coder/websocket closes the connection when a write's context
// ends, so a request given up mid-write would have dropped every other
// request on the connection with it. Writes now run to completion, or to
// the guard.
type stallGuard struct {
	timeout time.Duration
	drop    func() // closes the connection; called without mu held

	mu      sync.Mutex
	pending int         // writes in progress
	since   time.Time   // the last progress while pending > 0
	timer   *time.Timer // nil until the first write
	armed   bool        // timer will fire, unless stopped
	stopped bool        // for good: no timer is armed again
}

func newStallGuard(timeout time.Duration, drop func()) *stallGuard {
	return &stallGuard{timeout: timeout, drop: drop}
}

// begin marks a write as started.
func (g *stallGuard) begin() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.pending == 0 {
		g.since = time.Now()
	}
	g.pending++
	if g.armed || g.stopped {
		return
	}
	g.armed = true
	if g.timer == nil {
		g.timer = time.AfterFunc(g.timeout, g.check)
	} else {
		g.timer.Reset(g.timeout)
	}
}

// end marks a write as finished, which is progress.
func (g *stallGuard) end() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.pending--
	g.since = time.Now()
}

// check runs when the timer fires: it drops the connection if writes are
// pending with no progress for the timeout, and otherwise waits for the
// timeout after the last progress, or disarms when no write is pending.
// The timer is re-armed at most once per timeout, not per write.
func (g *stallGuard) check() {
	g.mu.Lock()
	if g.stopped || g.pending == 0 {
		g.armed = false
		g.mu.Unlock()
		return
	}
	wait := g.timeout - time.Since(g.since)
	if wait > 0 {
		g.timer.Reset(wait)
		g.mu.Unlock()
		return
	}
	g.stopped = true
	g.mu.Unlock()
	g.drop()
}

// stop disarms the guard for good, once its connection has ended.
func (g *stallGuard) stop() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.stopped = true
	if g.timer != nil {
		g.timer.Stop()
	}
}
