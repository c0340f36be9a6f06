package session

import (
	"sync"
	"sync/atomic"
)

// parker holds the connections of idle sessions whose reader goroutine
// has ended (see Session.park). One goroutine for the server, started at
// the first park, waits for any of them to become readable and then
// starts that session's reader again; an idle session thus costs no
// goroutine and no stack. The poller is the operating system's (epoll on
// Linux); where there is none, sessions are never parked and each keeps
// its goroutine blocked in the read.
//
// Parking and waking take no lock of the parker's: each connection's
// state is under its own mutex, and the connections are found by
// descriptor in a concurrent map, entered at a connection's first park
// and removed when it closes. A single mutex for all of them queued a
// burst of upgrades and woken pings on it (1,663 goroutines in one dump
// of a burst of 5,000 upgrades on a busy machine, each holding its
// stack, and the handlers net/http's buffers), and the poller's
// goroutine behind them.
type parker struct {
	conns   sync.Map // uintptr (descriptor) -> *parkedConn, registered with the poller
	poll    atomic.Pointer[poller]
	stopped atomic.Bool
	mu      sync.Mutex     // makes the poller, once
	wg      sync.WaitGroup // the poller's goroutine
}

// park registers c to start its session's reader when it becomes
// readable. It reports false, and the caller reads on, when c is closing,
// the parker is nil (a connection not made by a server) or stopped, or the
// connection cannot be polled.
func (p *parker) park(c *parkedConn) bool {
	if p == nil {
		return false
	}
	poll := p.poller()
	if poll == nil {
		return false
	}
	// c is marked parked before it is armed, since the poller may report
	// it at once.
	entered := false
	err := poll.arm(c.Conn, c.isRegistered(), func(fd uintptr) bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.closed {
			return false
		}
		if !c.registered {
			// Entered until Close: the descriptor is not reused before.
			p.conns.Store(fd, c)
			c.fd, c.registered = fd, true
		}
		c.parked, entered = true, true
		return true
	})
	if err == nil {
		return true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !entered {
		return false
	}
	if !c.parked {
		return true // Close woke it meanwhile: its reader runs
	}
	c.parked = false
	return false
}

// poller returns the poller, made at the first park; nil when stopped or
// when there is none here.
func (p *parker) poller() *poller {
	if p.stopped.Load() {
		return nil
	}
	if poll := p.poll.Load(); poll != nil {
		return poll
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped.Load() {
		return nil
	}
	if poll := p.poll.Load(); poll != nil {
		return poll
	}
	poll, err := newPoller()
	if err != nil {
		p.stopped.Store(true) // no poller here: sessions keep their goroutine
		return nil
	}
	p.poll.Store(poll)
	p.wg.Go(func() { p.run(poll) })
	return poll
}

// closing marks c closed, removes it from the poller's map and wakes its
// session if it is parked. The caller closes the descriptor after.
func (p *parker) closing(c *parkedConn) {
	if p == nil {
		return // a connection made without a server's parker never parks
	}
	c.mu.Lock()
	c.closed = true
	wake, registered, fd := c.parked, c.registered, c.fd
	c.parked = false
	c.mu.Unlock()
	if registered {
		p.conns.CompareAndDelete(fd, c)
	}
	if wake {
		go c.ready()
	}
}

// run starts the reader of each parked session whose connection became
// readable, until stop.
func (p *parker) run(poll *poller) {
	for {
		fds, ok := poll.wait()
		if !ok {
			return
		}
		for _, fd := range fds {
			// A stale readiness of a connection closed meanwhile may find
			// another one on the same descriptor: that session only reads
			// on a goroutine until its next message, as if not parked.
			v, ok := p.conns.Load(fd)
			if !ok {
				continue
			}
			c := v.(*parkedConn)
			c.mu.Lock()
			wake := c.parked
			c.parked = false
			c.mu.Unlock()
			if wake {
				go c.ready()
			}
		}
	}
}

// stop ends the poller's goroutine and waits for it. It is called once no
// session is left; no session parks after it.
func (p *parker) stop() {
	p.mu.Lock()
	p.stopped.Store(true)
	poll := p.poll.Load()
	p.mu.Unlock()
	if poll == nil {
		return
	}
	poll.close()
	p.wg.Wait()
}
