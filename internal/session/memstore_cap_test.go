package session

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/pipeline"
)

// A full store makes room: expired conversations first, then those
// closest to expiring, and never grows past its bound.
func TestMemoryConversationsBounded(t *testing.T) {
	ctx := context.Background()
	clock := time.Unix(0, 0)
	m := NewMemoryConversations(time.Hour)
	m.max = 200
	m.now = func() time.Time { return clock }
	conv := Conversation{Tenant: "t", Turns: []pipeline.Turn{{User: "u", Assistant: "a"}}}
	for i := range 200 {
		require.NoError(t, m.Save(ctx, fmt.Sprint("c", i), conv))
		clock = clock.Add(time.Second)
	}
	require.Len(t, m.convs, 200)

	// Full: each new one evicts the one closest to expiring.
	require.NoError(t, m.Save(ctx, "new", conv))
	require.NoError(t, m.Save(ctx, "new2", conv))
	require.Len(t, m.convs, 200)
	for _, id := range []string{"c0", "c1"} {
		_, ok, _ := m.Load(ctx, id)
		require.False(t, ok, id)
	}
	for _, id := range []string{"c2", "c199", "new", "new2"} {
		_, ok, _ := m.Load(ctx, id)
		require.True(t, ok, id)
	}
	// Saving an existing conversation never evicts.
	require.NoError(t, m.Save(ctx, "c2", conv))
	require.Len(t, m.convs, 200)

	// Expired ones go before live ones: by then c3..c101 have expired (c2
	// was saved again).
	clock = clock.Add(time.Hour - 100*time.Second)
	require.NoError(t, m.Save(ctx, "x", conv))
	require.NoError(t, m.Save(ctx, "y", conv))
	_, ok, _ := m.Load(ctx, "c150")
	require.True(t, ok, "a live conversation was evicted while expired ones made room")
	require.Less(t, len(m.convs), 200)
	for range 1000 {
		require.NoError(t, m.Save(ctx, fmt.Sprint("z", clock.UnixNano()), conv))
		clock = clock.Add(time.Millisecond)
		require.LessOrEqual(t, len(m.convs), 200)
	}
}
