package session

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A link is measured while busy, from linkSpan into its busy period, and a
// chunk fits only while what waits ahead of the terminal reaches the
// client by the deadline at that rate.
func TestLinkFits(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	var unacked int64
	newL := func() *link { return &link{unacked: func() (int64, bool) { return unacked, true }} }

	t.Run("keeping up", func(t *testing.T) {
		l := newL()
		unacked = 0
		for i := range 50 {
			now := at(20 * i)
			require.True(t, l.fits(now, int64(i)*7000, 0, 7000, now.Add(10*time.Millisecond)), "a link that keeps up paces nothing")
		}
		require.False(t, l.measured)
	})
	t.Run("unknown rate bounds the burst", func(t *testing.T) {
		l := newL()
		unacked = 20 << 10
		require.True(t, l.fits(at(0), 20<<10, 0, 8<<10, at(1000)))
		require.False(t, l.fits(at(0), 20<<10, 8<<10, 8<<10, at(1000)), "past linkFirst before a measure")
		unacked = 0
		require.True(t, l.fits(at(0), 20<<10, 0, 40<<10, at(1000)), "a chunk larger than linkFirst goes when nothing waits")
	})
	t.Run("unknown rate near the deadline", func(t *testing.T) {
		l := newL()
		// 8 KiB wait on a link not measured yet: 8 more and the terminal
		// take 0.28 s at linkFloor.
		unacked = 8 << 10
		require.False(t, l.fits(at(0), 8<<10, 0, 8<<10, at(300)), "within linkFirst, but late at the floor")
		require.True(t, l.fits(at(0), 8<<10, 0, 8<<10, at(400)))
	})
	t.Run("slow link", func(t *testing.T) {
		l := newL()
		// 200 KiB written; the client's buffer takes 32 KiB at once, then
		// the link carries 100 KiB/s (10 KiB every 100 ms).
		unacked = 200 << 10
		require.False(t, l.fits(at(0), 200<<10, 0, 6<<10, at(1000)))
		unacked = (200 - 32 - 10) << 10
		require.False(t, l.fits(at(100), 200<<10, 0, 6<<10, at(1100)), "the first span, the client's buffer filling, is not measured")
		require.False(t, l.measured)
		unacked = (200 - 32 - 20) << 10
		require.False(t, l.fits(at(200), 200<<10, 0, 6<<10, at(1200)))
		require.True(t, l.measured)
		require.InDelta(t, 100<<10, l.rate, 1, "the link, not its first burst")
		unacked = (200 - 32 - 20 - 125) << 10 // 125 KiB more in 1.2 s
		require.True(t, l.fits(at(1400), 200<<10, 0, 6<<10, at(2400)), "23+6+2 KiB take 0.31 s")
		require.False(t, l.fits(at(1400), 200<<10, 70<<10, 6<<10, at(2400)), "with 70 KiB still queued, 1.01 s")
	})
	t.Run("no more than linkHorizon waits", func(t *testing.T) {
		l := newL()
		// 100 KiB/s, measured as above; the deadline is far off.
		unacked = 200 << 10
		l.fits(at(0), 200<<10, 0, 0, at(9000))
		unacked = (200 - 32 - 10) << 10
		l.fits(at(100), 200<<10, 0, 0, at(9000))
		unacked = (200 - 32 - 20) << 10
		l.fits(at(200), 200<<10, 0, 0, at(9000))
		require.InDelta(t, 100<<10, l.rate, 1)
		unacked = 20 << 10
		require.True(t, l.fits(at(1480), 200<<10, 0, 6<<10, at(9000)), "26 KiB is 0.26 s of the link")
		require.False(t, l.fits(at(1480), 200<<10, 8<<10, 6<<10, at(9000)),
			"34 KiB is over 0.3 s of the link: it waits for the link, where the speech budget can still drop it")
	})
	t.Run("a share that falls", func(t *testing.T) {
		l := newL()
		// The link carries 100 KiB/s for a second, then 50 (another
		// connection on it started sending): the busy period's rate is
		// still 80, the last window's 50.
		const sent = 1 << 20
		unacked = 400 << 10
		l.fits(at(0), sent, 0, 0, at(9000))
		unacked -= 36 << 10
		l.fits(at(100), sent, 0, 0, at(9000))
		for ms := 150; ms <= 1100; ms += 50 {
			unacked -= 5 << 10
			l.fits(at(ms), sent, 0, 0, at(9000))
		}
		for ms := 1150; ms <= 2100; ms += 50 {
			unacked -= 2560
			l.fits(at(ms), sent, 0, 0, at(9000))
		}
		require.InDelta(t, 75<<10, l.rate, 1<<10, "the busy period's rate lags")
		r, ok := l.recentRate(at(2100))
		require.True(t, ok)
		require.InDelta(t, 50<<10, r, 1<<10, "the last window's follows")
		// 10 KiB waiting, as many as were delivered by now, and a 2 KiB
		// chunk: with the terminal's 2 KiB, 0.7 * 50 KiB/s takes them in
		// 0.4 s, 0.7 * 75 in 0.27 s.
		delivered := int64(sent) - unacked
		unacked = 10 << 10
		require.False(t, l.fits(at(2100), delivered+unacked, 0, 2<<10, at(2550)), "counted at the falling share")
		require.True(t, l.fits(at(2100), delivered+unacked, 0, 2<<10, at(2700)))
	})
	t.Run("acknowledgements in bursts", func(t *testing.T) {
		l := newL()
		// 100 KiB/s, acknowledged 20 KiB at a time every 200 ms: the rate
		// over the period is the link's, never a window's 0.
		unacked = 300 << 10
		l.fits(at(0), 300<<10, 0, 0, at(5000))
		l.fits(at(100), 300<<10, 0, 0, at(5000))
		for i := 1; i <= 10; i++ {
			l.fits(at(100+200*i-1), 300<<10, 0, 0, at(5000)) // just before the burst
			unacked -= 20 << 10
			l.fits(at(100+200*i), 300<<10, 0, 0, at(5000))
		}
		require.InDelta(t, 100<<10, l.rate, 1)
	})
	t.Run("stalled client", func(t *testing.T) {
		l := newL()
		unacked = 50 << 10
		for ms := range 4 {
			now := at(100 * ms)
			require.False(t, l.fits(now, 50<<10, 0, 1, now.Add(time.Hour)), "nothing delivered: nothing more fits")
		}
		require.True(t, l.measured)
	})
	t.Run("platform cannot tell", func(t *testing.T) {
		l := &link{}
		require.True(t, l.fits(t0, 0, 1<<30, 1<<20, t0.Add(time.Millisecond)))
	})
}

// A link measured slow once (a client that paused, a burst of loss) and
// keeping up since must not be held to that measure: a link that keeps up
// is not measured and nothing waits (architecture.md). fits applied the
// stale rate to every chunk, and an idle link, never busy again, was
// never measured again: after one stall, no chunk of any later answer
// fitted, and the session's speech was cut for good.
func TestLinkKeepingUpAfterAStall(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	var unacked int64
	l := &link{unacked: func() (int64, bool) { return unacked, true }}
	unacked = 50 << 10
	for ms := range 4 {
		l.fits(at(100*ms), 50<<10, 0, 1, at(100*ms).Add(time.Hour))
	}
	require.True(t, l.measured)
	// The client reads again: everything acknowledged, nothing queued.
	unacked = 0
	for i := range 20 {
		now := at(1000 + 50*i)
		require.True(t, l.fits(now, 50<<10+int64(i)*7000, 0, 7000, now.Add(2*time.Second)), "a link that keeps up waits for nothing")
		unacked = 0 // acknowledged at once
	}
}
