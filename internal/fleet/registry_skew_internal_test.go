package fleet

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/fleet/redistest"
)

type idle struct{}

func (idle) Sessions() int        { return 0 }
func (idle) FreeRecognizers() int { return 1 }
func (idle) Saturated() bool      { return false }
func (idle) Draining() bool       { return false }

func ids(list []Instance) []string {
	out := make([]string, len(list))
	for i, in := range list {
		out[i] = in.ID
	}
	return out
}

// TestRegistrySurvivesClockSkew: the registry's liveness is the entry's
// TTL, which Redis keeps; instances' clocks may differ by seconds (NTP
// not yet synced after a boot, a VM resumed). An instance whose clock is
// 10 s ahead listed no other instance at all (GET /v1/cluster showed it
// alone: their scores, by their clocks, looked older than 3 s), and one
// whose clock is 2 min ahead removed every other instance from the set
// at each of its publishes, so that they vanished from every listing
// until their own next publish.
func TestRegistrySurvivesClockSkew(t *testing.T) {
	srv := redistest.Start(t)
	ra, rb, rc := manual(t, srv), manual(t, srv), manual(t, srv)
	a := NewRegistry(ra, "a", "h:1", idle{}, time.Second)
	b := NewRegistry(rb, "b", "h:2", idle{}, time.Second)
	c := NewRegistry(rc, "c", "h:3", idle{}, time.Second)
	a.now = func() time.Time { return time.Now().Add(10 * time.Second) }
	c.now = func() time.Time { return time.Now().Add(2 * time.Minute) }
	ctx := t.Context()

	require.NoError(t, a.publish(ctx))
	require.NoError(t, b.publish(ctx))
	require.Equal(t, []string{"a", "b"}, ids(a.List(ctx)), "the instance 10 s ahead lists the live one")
	require.Equal(t, []string{"b", "a"}, ids(b.List(ctx)))

	require.NoError(t, c.publish(ctx))
	require.Equal(t, []string{"b", "a", "c"}, ids(b.List(ctx)), "the instance 2 min ahead removes no live one")
}
