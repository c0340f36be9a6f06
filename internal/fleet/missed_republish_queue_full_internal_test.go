package fleet

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/fleet/redistest"
)

// TestMissedRepublishQueueFullRetried: terminals kept here during an
// outage are queued for Redis by the upkeep after its return. When that
// write cannot be queued (the write-behind queue is full: the backlog of
// an outage's end), its fallback finds no pending write for the
// conversation and must still leave it to the next upkeep: the upkeep had
// already taken it off the list it republishes, so the terminals stayed
// on this instance for good and a resume elsewhere never got them.
func TestMissedRepublishQueueFullRetried(t *testing.T) {
	srv := redistest.Start(t)
	a, err := New(Config{URL: srv.URL(), Budget: time.Second, QueueSize: 1}, slog.New(slog.DiscardHandler), nil)
	require.NoError(t, err)
	t.Cleanup(func() { a.client.Close() })
	b := manual(t, srv)
	ca, cb := NewConversations(a, time.Minute), NewConversations(b, time.Minute)

	ca.AddMissed("c", []byte("m1")) // Redis away: kept here
	a.up.Store(true)
	a.queue <- write{op: "other", do: func(context.Context) error { return nil }} // the queue is full
	upkeep(t, a)                                                                  // cannot queue the write
	drain(t, a)
	upkeep(t, a) // the next check: queued now
	drain(t, a)

	got, err := cb.TakeMissed(t.Context(), "c")
	require.NoError(t, err)
	require.Equal(t, [][]byte{[]byte("m1")}, got, "the resume on another instance gets them")
}
