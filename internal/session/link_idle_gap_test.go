package session

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A client that stalled while an answer's audio waited, and read it all
// once that answer was over, is next looked at when the following answer
// speaks, maybe many seconds later. The busy period's drain ended at some
// moment in between that no sample saw: counting the whole gap as the
// time the drain took measured the link at a fraction of its rate, which
// no chunk of any later answer then fitted, and the link, never busy
// again, was never measured again: the session's speech was cut for good.
func TestLinkStallThenLongIdle(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	for _, gap := range []int{2_000, 20_000, 120_000} {
		var unacked int64
		l := &link{unacked: func() (int64, bool) { return unacked, true }}
		// The stall: 50 KiB acknowledged by none of four looks at it.
		unacked = 50 << 10
		for ms := range 4 {
			l.fits(at(100*ms), 50<<10, 0, 6<<10, at(100*ms).Add(time.Second))
		}
		// The next answer, gap later: everything was acknowledged meanwhile.
		unacked = 0
		sent := int64(50 << 10)
		for i := range 10 {
			now := at(300 + gap + 50*i)
			require.True(t, l.fits(now, sent, 0, 6<<10, now.Add(1500*time.Millisecond)),
				"gap %d ms, chunk %d: a link that keeps up waits for nothing", gap, i)
			sent += 6 << 10
		}
	}
}

// Within an answer, nothing looks at the link while the next sentence
// is synthesised, and a link that drained meanwhile keeps its measure:
// a chunk the measured rate cannot carry by the deadline still waits.
func TestLinkKeepsItsMeasureOverAShortUnseenDrain(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	var unacked int64
	l := &link{unacked: func() (int64, bool) { return unacked, true }}
	// 60 KiB written; the client's buffer takes 32 KiB at once, then the
	// link carries 100 KiB/s.
	unacked = 60 << 10
	l.fits(at(0), 60<<10, 0, 6<<10, at(1000))
	unacked = (60 - 32 - 10) << 10
	l.fits(at(100), 60<<10, 0, 6<<10, at(1100))
	unacked = (60 - 32 - 20) << 10
	l.fits(at(200), 60<<10, 0, 6<<10, at(1200))
	require.True(t, l.measured)
	// A sentence synthesised for 500 ms, the link drained meanwhile; a
	// 25 KiB chunk (48 kHz, base64) 300 ms before the deadline takes 250
	// ms at 100 KiB/s, more than the 140 ms it is counted on to have.
	unacked = 0
	require.False(t, l.fits(at(700), 60<<10, 0, 25<<10, at(1000)), "the measure stands")
	require.InDelta(t, 100<<10, l.rate, 1)
}
