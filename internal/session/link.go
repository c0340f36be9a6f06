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
// Before any, linkFirst bytes may wait, as long as they would arrive in
// time at linkFloor: a sentence's chunks come in one burst, before a
// round trip has told anything of the link.
//
// A link's share can fall at any moment (another connection on it starts
// sending), and what the kernel holds is committed: it cannot be taken
// back to let the terminal by. So the rate counted on is the lower of the
// busy period's and that of its last linkWindow, and no more than
// linkHorizon of audio at that rate waits ahead of the terminal at once:
// a chunk that would fit before the deadline still waits for the link
// (in the speech stage, whose budget can drop it) until the link has
// carried what is ahead of it. Counting on a whole busy period's rate up to the
// deadline, a session that measured the link alone and then shared it
// read about one terminal in ten late, by up to 520 ms ("Speech over a
// slow link", docs/benchmarks.md).
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
	// recent holds samples of the busy period since baseAt, at least
	// linkStep apart, for the rate of its last linkWindow; n of them.
	recent [linkSamples]linkSample
	n      int
}

// linkSample is what had been delivered at a moment of a busy period.
type linkSample struct {
	at    time.Time
	deliv int64
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
	// linkFloor is the rate, in bytes a second, counted on for what is
	// sent on a busy link not measured yet (within linkFirst), and for a
	// chunk that measures a link again: a 0.5 Mbit/s share. A first
	// answer's chunks, taken close to the deadline at any rate, made its
	// terminal late on a link shared by two sessions at 2 Mbit/s.
	linkFloor = 64 << 10
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
	// linkHorizon is the most audio, in time at the rate counted on,
	// that waits ahead of the terminal at once: if the rate halves right
	// after, what waits takes twice that, which the deadline's slack and
	// a fresh measure absorb.
	linkHorizon = 300 * time.Millisecond
	// linkWindow is the span of the recent rate: long enough to ride out
	// acknowledgements that come in bursts a tenth or two of a second
	// apart, short enough to see a share fall within an answer.
	linkWindow = 600 * time.Millisecond
	// linkStep spaces the samples kept for the recent rate.
	linkStep    = 25 * time.Millisecond
	linkSamples = int(linkWindow/linkStep) + 2
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
	// by reports whether what waits, n and the terminal arrive in time at
	// rate bytes a second.
	left := until.Sub(now.Add(linkSlack)).Seconds()
	by := func(rate float64) bool { return float64(waiting+n+linkTerminal) <= rate*left }
	if !l.measured {
		if waiting >= linkIdle && !by(linkFloor) {
			return false // busy, and not known to be faster than the floor
		}
		return waiting+n <= linkFirst || waiting == 0
	}
	rate := l.rate
	if r, ok := l.recentRate(now); ok {
		rate = min(rate, r)
	}
	if by(linkShare*rate) && (float64(waiting+n) <= rate*linkHorizon.Seconds() || waiting < linkIdle) {
		return true
	}
	// A chunk goes on a link that kept up since its measure, taken more
	// than linkForget ago: it makes the link busy, and so measured again.
	return waiting < linkIdle && now.Sub(l.measureAt) > linkForget && by(linkFloor)
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
		l.busyAt, l.baseAt, l.n = time.Time{}, time.Time{}, 0
	case l.busyAt.IsZero():
		l.busyAt, l.baseAt, l.n = now, time.Time{}, 0
	case l.baseAt.IsZero():
		if now.Sub(l.busyAt) >= linkSpan {
			l.baseAt, l.baseDeliv = now, delivered
			l.keep(now, delivered)
		}
	default:
		l.keep(now, delivered)
		if now.Sub(l.baseAt) >= linkSpan {
			l.rate, l.measured, l.measureAt = float64(delivered-l.baseDeliv)/now.Sub(l.baseAt).Seconds(), true, now
		}
	}
}

// keep records a sample of the busy period, linkStep after the last one
// at the earliest, dropping the oldest when full; l.mu is held.
func (l *link) keep(now time.Time, delivered int64) {
	if l.n > 0 && now.Sub(l.recent[l.n-1].at) < linkStep {
		return
	}
	if l.n == len(l.recent) {
		copy(l.recent[:], l.recent[1:])
		l.n--
	}
	l.recent[l.n] = linkSample{now, delivered}
	l.n++
}

// recentRate is the rate over the last linkWindow of the busy period,
// from the oldest sample within it; false until the samples span half a
// window, or when the link keeps up. l.mu is held.
func (l *link) recentRate(now time.Time) (float64, bool) {
	if l.n < 2 {
		return 0, false
	}
	i := 0
	for i < l.n-2 && now.Sub(l.recent[i+1].at) >= linkWindow {
		i++
	}
	first, last := l.recent[i], l.recent[l.n-1]
	span := last.at.Sub(first.at)
	if span < linkWindow/2 {
		return 0, false
	}
	return float64(last.deliv-first.deliv) / span.Seconds(), true
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
