package fleet

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/fleet/redistest"
	"github.com/voiced/voiced/internal/stages/llm"
)

// A conversation's total in Redis outlives its last addition by the time
// the conversation can still be resumed, and by at least a day: with a
// fixed day it expired after 24 h even when -conversation-ttl was a week,
// and a resumed conversation's cost cap started again from nothing.
func TestSpendConversationKeptAsLongAsResumable(t *testing.T) {
	srv := redistest.Start(t)
	raw := redis.NewClient(&redis.Options{Addr: srv.Addr, DisableIdentity: true})
	defer raw.Close()
	for _, tc := range []struct {
		keep, want time.Duration
	}{
		{0, 24 * time.Hour},
		{30 * time.Minute, 24 * time.Hour},
		{7 * 24 * time.Hour, 7 * 24 * time.Hour},
	} {
		r := manual(t, srv)
		s := NewSpend(r, tc.keep)
		conv := "c-" + tc.keep.String()
		require.NoError(t, s.AddSpend(t.Context(), llm.SpendKey{Conversation: conv, Day: "2026-12-01"}, 1))
		drain(t, r)
		key, _, _ := s.keys(llm.SpendKey{Conversation: conv})
		ttl, err := raw.TTL(t.Context(), key).Result()
		require.NoError(t, err)
		require.InDelta(t, tc.want.Seconds(), ttl.Seconds(), 5, "keep %v", tc.keep)
	}
}
