package deadline_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/deadline"
)

// TestLearnedMinimumAgesOut: runs measured long ago do not hold a
// stage's minimum up. A stage whose minimum is above the time requests
// leave it is skipped and so never measured again: only the age of its
// old runs can bring it back.
func TestLearnedMinimumAgesOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var c deadline.Cost
		s := deadline.Stage{Name: "llm", Cap: time.Second, Min: 120 * time.Millisecond}
		for range 16 {
			c.Observe(150 * time.Millisecond)
		}
		require.Equal(t, 120*time.Millisecond, s.Learned(&c).Min)
		time.Sleep(30 * time.Second)
		for range 20 {
			c.Observe(100 * time.Microsecond)
		}
		require.Equal(t, 120*time.Millisecond, s.Learned(&c).Min, "recent slow runs still count")
		time.Sleep(31 * time.Second)
		require.Equal(t, time.Millisecond, s.Learned(&c).Min, "the slow runs aged out: the recent cheap ones decide")
		time.Sleep(time.Hour)
		require.Equal(t, time.Millisecond, s.Learned(&c).Min, "nothing recent: unmeasured, a millisecond")
		_, ok := c.P99()
		require.False(t, ok)
	})
}
