package session

import (
	"net"
	"sync"
	"time"
)

// link paces a session's answer audio to what its client's connection
// carries. Audio is synthesised many times faster than real time, and a
// request's terminal message follows all of its audio on the connection
// (protocol.md): on a slow link, an answer queued in one burst held the
// terminal, written in time, seconds past the deadline at the client
// (docs/benchmarks.md, "Speech over a slow link"). So a chunk is taken
// only while everything ahead of the terminal can reach the client before
// the deadline, at the rate the client is measured to receive; otherwise
// the speech stage waits for the link, within its own budget, and speech
// stops there (speech_truncated). On a link that keeps up nothing waits.
//
// The rate is what the kernel reports acknowledged (bytes written less
// those it still holds unacknowledged, TIOCOUTQ) since linkSpan into the
// current busy period: the first span also counts what fills the client's
// receive buffer at once, which overstated a 100 KiB/s link by half, and
// a rate over the whole period rides out acknowledgements that come in
// bursts (a tenth of a second of none, then 20 KiB). The last measure
// stands while the link keeps up and into the next busy period until
// that one has its own; past linkForget, it no longer holds back a chunk
// when nothing waits, which makes the link busy and measured again.
// Before any, linkFirst bytes may wait: a sentence's chunks come in one
// burst, before a round trip has told anything of the link.
type link struct {
	unacked func() (int64, bool) // bytes the kernel holds not yet acknowledged; false: unknown

	mu        sync.Mutex
	busyAt    time.Time // when the current busy period began; zero: the link keeps up
	baseAt    time.Time // measuring from here, linkSpan into the busy period; zero: not yet
	baseDeliv int64     // bytes delivered at baseAt
	lastAt    time.Time // the last sample
	rate      float64   // bytes a second, the latest measure
	measured  bool      // rate holds a measure
	measureAt time.Time // when the link was last seen at rate
}

const (
	// linkSpan is how far into a busy period the measure starts, and the
	// shortest time it is taken over: a few round trips of most links.
	linkSpan = 100 * time.Millisecond
	// linkIdle: with fewer bytes waiting, the link keeps up.
	linkIdle = 4 << 10
	// linkFirst is what may wait before the link's rate is known: a
	// second of 16 kHz speech. A chunk larger than that (48 kHz base64
	// is 25 KB) goes when nothing waits.
	linkFirst = 32 << 10
	// linkTerminal is room kept for the terminal message (a result).
	linkTerminal = 2 << 10
	// linkShare is the part of the measured rate counted on: a link
	// shared with other connections carries less for each once they send
	// too (two sessions on a 2 Mbit/s link read 3 of 6 terminals late
	// counting on all of it).
	linkShare = 0.7
	// linkSlack is how much earlier than the deadline what waits should
	// have arrived: what the kernel counts acknowledged may still wait in
	// the client's receive buffer, and the rate is a measure, not a
	// promise. The speech is that much shorter on a slow link.
	linkSlack = 100 * time.Millisecond
	// linkRecheck is how often a chunk waiting for the link looks again.
	linkRecheck = 10 * time.Millisecond
	// linkForget is how long a measure holds back every chunk of a link
	// that keeps up: longer than the gaps between an answer's sentences,
	// shorter than those between answers. A measure of a stall, kept for
	// good, held every later answer's audio on a link that then never
	// waited, and so was never busy, and never measured again.
	linkForget = time.Second
)

// newLink measures conn when the platform can tell its unacknowledged
// bytes; otherwise nothing is paced (see fits).
func newLink(conn net.Conn) *link { return &link{unacked: unackedOf(conn)} }

// fits reports whether n more bytes can reach the client by until, after
// the queued bytes still in the session's queue, sent bytes having been
// written to the connection so far. Each call is a measure of the link.
func (l *link) fits(now time.Time, sent, queued, n int64, until time.Time) bool {
	if l.unacked == nil {
		return true
	}
	unacked, ok := l.unacked()
	if !ok {
		return true
	}
	waiting := queued + unacked
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sample(now, sent-unacked, waiting)
	if !l.measured {
		return waiting+n <= linkFirst || waiting == 0
	}
	if float64(waiting+n+linkTerminal) <= linkShare*l.rate*until.Sub(now.Add(linkSlack)).Seconds() {
		return true
	}
	// A chunk goes on a link that kept up since its measure, taken more
	// than linkForget ago: it makes the link busy, and so measured again.
	return waiting < linkIdle && now.Sub(l.measureAt) > linkForget
}

// sample measures the rate while the link is busy; l.mu is held.
func (l *link) sample(now time.Time, delivered, waiting int64) {
	last := l.lastAt
	l.lastAt = now
	switch {
	case waiting < linkIdle:
		// Keeping up: only a busy link is measured. The period that ends
		// here counts whole, its drain included: a client that paused and
		// then read everything is not held to the pause. When nothing
		// looked at the link for more than linkSpan before, the drain
		// ended unseen somewhere in that gap, and the period's rate is
		// only a bound below the link's: it raises the measure, as of
		// the last look at the busy link.
		if !l.baseAt.IsZero() && now.Sub(l.baseAt) >= linkSpan {
			rate := float64(delivered-l.baseDeliv) / now.Sub(l.baseAt).Seconds()
			switch {
			case now.Sub(last) <= linkSpan:
				l.rate, l.measureAt = rate, now
			case !l.measured || rate > l.rate:
				l.rate, l.measureAt = rate, last
			}
			l.measured = true
		}
		l.busyAt, l.baseAt = time.Time{}, time.Time{}
	case l.busyAt.IsZero():
		l.busyAt, l.baseAt = now, time.Time{}
	case l.baseAt.IsZero():
		if now.Sub(l.busyAt) >= linkSpan {
			l.baseAt, l.baseDeliv = now, delivered
		}
	case now.Sub(l.baseAt) >= linkSpan:
		l.rate, l.measured, l.measureAt = float64(delivered-l.baseDeliv)/now.Sub(l.baseAt).Seconds(), true, now
	}
}

// frameBytes is the size of a WebSocket frame (unmasked, as a server
// sends) carrying n bytes.
func frameBytes(n int) int64 {
	switch {
	case n < 126:
		return int64(n) + 2
	case n < 1<<16:
		return int64(n) + 4
	}
	return int64(n) + 10
}
