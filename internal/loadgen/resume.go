package loadgen

import (
	"cmp"
	"context"
	"time"

	"github.com/coder/websocket"

	"github.com/voiced/voiced/client"
)

// resumePolicy is the client's reconnection with -resume: quick first
// tries (a killed instance's sessions go to another at once), about 10 s
// in all.
var resumePolicy = client.Reconnect{Initial: 50 * time.Millisecond, Max: time.Second, Attempts: 20}

// resumeTimeout bounds how long a turn waits for its session to be back
// (reconnected, not draining) before the slot gives it up.
const resumeTimeout = 15 * time.Second

// dropped is the client's OnDisconnect with -resume: the requests still
// waiting miss their terminal messages for now; a resumed session should
// replay them, unless the instance died with them (no close frame).
func (c *conn) dropped(err error) {
	why := goneServerClosed
	if websocket.CloseStatus(err) == -1 {
		why = goneKilled
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.up = false
	if c.closing || c.ending {
		return
	}
	c.dropAt, c.dropWhy = time.Now(), why
	c.r.serverCloses.Add(1)
	c.r.resumeDrop(why)
	for _, as := range c.byID {
		for _, a := range as {
			if a.term == nil && a.gone == goneNone && a.dropped == goneNone && !a.waitedOut {
				a.dropped = why
			}
		}
	}
}

// connected is the client's OnConnect with -resume. After a drop it
// records the time to the resumed session.ready (as read, before the
// clock alignment that follows it); a session that was not
// resumed is a new one, and what its predecessor missed is gone with it.
func (c *conn) connected(ready client.SessionReady) {
	c.mu.Lock()
	c.up, c.upAt = true, ready.At
	if !c.dropAt.IsZero() {
		c.r.resumed(ready.Resumed, c.dropWhy, ready.At.Sub(c.dropAt))
		c.dropAt = time.Time{}
		if c.cl != nil {
			// Another instance's clock, maybe: new requests take it.
			c.offset, _ = c.cl.Offset()
		}
		if !ready.Resumed {
			for _, as := range c.byID {
				for _, a := range as {
					if a.term == nil && a.dropped != goneNone {
						c.markGone(a, goneServerClosed)
					}
				}
			}
		}
	}
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// awaitSession waits, with -resume, until the session is connected and
// not draining (a draining session closes with 1012 and is resumed
// elsewhere), the client gives up, ctx ends or resumeTimeout passes.
// It reports whether the session can take a new request. It runs before
// every turn, and the session is nearly always up: the timer is made
// only when there is something to wait for.
func (c *conn) awaitSession(ctx context.Context) bool {
	if c.sessionUp() {
		return true
	}
	t := time.NewTimer(cmp.Or(c.r.cfg.resumeTimeout, resumeTimeout))
	defer t.Stop()
	for !c.sessionUp() {
		select {
		case <-c.wake:
		case <-c.dead():
			return false
		case <-ctx.Done():
			return false
		case <-t.C:
			return false
		}
	}
	return true
}

// sessionUp reports whether the session is connected and not draining.
func (c *conn) sessionUp() bool {
	c.mu.Lock()
	up := c.up
	c.mu.Unlock()
	return up && !c.cl.Draining()
}

// resumeDrop counts a connection the server dropped.
func (r *runner) resumeDrop(why goneReason) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if why == goneKilled {
		r.resume.killed++
	} else {
		r.resume.closed++
	}
}

// resumed counts a reconnection after a drop, d after it.
func (r *runner) resumed(ok bool, why goneReason, d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if ok {
		r.resume.times = append(r.resume.times, d)
		if why == goneKilled {
			r.resume.afterKill = append(r.resume.afterKill, d)
		} else {
			r.resume.afterClose = append(r.resume.afterClose, d)
		}
	} else {
		r.resume.notResumed++
	}
}

// gaveUp ends a session that did not come back in time.
func (r *runner) gaveUp(c *conn) {
	r.mu.Lock()
	r.resume.gaveUp++
	r.mu.Unlock()
	r.disconnect(c, false)
}

// resumeCounts is what -resume counts of connections; guarded by the
// runner's mu.
type resumeCounts struct {
	killed, closed, notResumed, gaveUp int
	// drop -> resumed session.ready: all, and by how the drop came
	times, afterKill, afterClose []time.Duration
}

// ResumeReport is what -resume found.
type ResumeReport struct {
	// Drops are connections the server dropped: Killed ended without a
	// close frame (the instance died), Closed with one (1012 on a drain).
	Drops  int `json:"drops"`
	Killed int `json:"killed"`
	Closed int `json:"closed"`
	// Resumed reconnected with "resumed": true in session.ready within
	// Time of the drop; NotResumed reconnected as a new session; GaveUp
	// never reconnected.
	Resumed    int  `json:"resumed"`
	NotResumed int  `json:"notResumed"`
	GaveUp     int  `json:"gaveUp"`
	Time       Dist `json:"timeMs"`
	// TimeAfterKill and TimeAfterClose split Time by how the drop came.
	TimeAfterKill  Dist `json:"timeAfterKillMs"`
	TimeAfterClose Dist `json:"timeAfterCloseMs"`
	// Missed are requests waiting for their terminal message when their
	// connection dropped. Of them, Replayed got it on the resumed session
	// (exactly once: a second copy counts in Invariants.Duplicate; it is
	// neither late nor in the latencies, unless the server forwarded it
	// on a session that was back before its deadline),
	// LostWithInstance got none because their instance was killed (its
	// connection ended without a close frame; resumed or not),
	// LostNotResumed none because their session, closed by the server,
	// was not resumed (also in Requests.ServerClosed), and the rest are in
	// Invariants.Missing (resumed, and the terminal never came).
	// RefusedDraining are requests refused with unavailable because the
	// server had begun to drain when they came (before the client heard):
	// planned with -resume.
	RefusedDraining  int `json:"refusedDraining"`
	Missed           int `json:"missed"`
	Replayed         int `json:"replayed"`
	LostWithInstance int `json:"lostWithInstance"`
	LostNotResumed   int `json:"lostNotResumed"`
}
