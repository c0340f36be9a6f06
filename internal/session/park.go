package session

import "sync"

// parker holds the connections of idle sessions whose reader goroutine
// has ended (see Session.park). One goroutine for the server, started at
// the first park, waits for any of them to become readable and then
// starts that session's reader again; an idle session thus costs no
// goroutine and no stack. The poller is the operating system's (epoll on
// Linux); where there is none, sessions are never parked and each keeps
// its goroutine blocked in the read.
type parker struct {
	mu      sync.Mutex
	poll    *poller                 // nil until the first park; guarded by mu
	parked  map[uintptr]*parkedConn // by file descriptor; guarded by mu
	stopped bool                    // guarded by mu
	wg      sync.WaitGroup          // the poller's goroutine
}

// park registers c to start its session's reader when it becomes
// readable. It reports false, and the caller reads on, when c is closing,
// the parker is nil (a connection not made by a server) or stopped, or the
// connection cannot be polled.
func (p *parker) park(c *parkedConn) bool {
	if p == nil {
		return false
	}
	p.mu.Lock()
	ok := !c.closed && !p.stopped
	if ok && p.poll == nil {
		poll, err := newPoller()
		if err != nil {
			p.stopped = true // no poller here: sessions keep their goroutine
			ok = false
		} else {
			p.poll, p.parked = poll, make(map[uintptr]*parkedConn)
			p.wg.Go(p.run)
		}
	}
	poll := p.poll
	p.mu.Unlock()
	if !ok {
		return false
	}
	// c is entered before it is armed, since the poller may report it at
	// once; the arming, a system call, is outside mu, which every park and
	// wake-up of every session takes (under it, a burst of upgrades queued
	// on the lock, each holding its handler's memory).
	entered := false
	err := poll.arm(c.Conn, c.registered, func(fd uintptr) bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		if c.closed {
			return false
		}
		p.parked[fd] = c
		c.fd, c.parked, c.registered, entered = fd, true, true, true
		return true
	})
	if err == nil {
		return true
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !entered {
		return false
	}
	if !c.parked {
		return true // Close woke it meanwhile: its reader runs
	}
	delete(p.parked, c.fd)
	c.parked = false
	return false
}

// closing marks c closed and wakes its session if it is parked.
func (p *parker) closing(c *parkedConn) {
	if p == nil {
		return // a connection made without a server's parker never parks
	}
	p.mu.Lock()
	c.closed = true
	wake := c.parked
	if wake {
		c.parked = false
		delete(p.parked, c.fd)
	}
	p.mu.Unlock()
	if wake {
		go c.ready()
	}
}

// run starts the reader of each parked session whose connection became
// readable, until stop.
func (p *parker) run() {
	for {
		fds, ok := p.poll.wait()
		if !ok {
			return
		}
		for _, fd := range fds {
			p.mu.Lock()
			c := p.parked[fd]
			if c != nil {
				delete(p.parked, fd)
				c.parked = false
			}
			p.mu.Unlock()
			// A stale readiness of a connection closed meanwhile may find
			// another one on the same descriptor: that session only reads
			// on a goroutine until its next message, as if not parked.
			if c != nil {
				go c.ready()
			}
		}
	}
}

// stop ends the poller's goroutine and waits for it. It is called once no
// session is left; no session parks after it.
func (p *parker) stop() {
	p.mu.Lock()
	p.stopped = true
	poll := p.poll
	p.mu.Unlock()
	if poll == nil {
		return
	}
	poll.close()
	p.wg.Wait()
}
