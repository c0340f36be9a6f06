package loadgen

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestIdleWindow checks that an idle run's memory figures stop at the
// scrape taken with every session still open: the teardown after it (every
// session waking to read its close) is not what an idle session holds.
func TestIdleWindow(t *testing.T) {
	s := &scraper{samples: []sample{
		{rss: 10, heap: 1},  // before the load
		{rss: 50, heap: 30}, // opening the sessions
		{rss: 40, heap: 20}, // held, the scrapeHeld sample
		{rss: 70, heap: 45}, // closing them
	}, held: 3}
	st := s.stats()
	require.Equal(t, 50.0, st.IdleRSSMaxBytes, "the burst of opening counts")
	require.Equal(t, 40.0, st.IdleRSSHeldBytes)
	require.Equal(t, 30.0, st.IdleHeapInuseMaxBytes)
	require.Equal(t, 70.0, st.RSSMaxBytes, "the whole run's peak is still reported")

	s.held = 0 // not an idle run, or its held scrape failed
	st = s.stats()
	require.Zero(t, st.IdleRSSMaxBytes)
}
