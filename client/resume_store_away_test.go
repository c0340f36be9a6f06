package client_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/client"
	"github.com/voiced/voiced/internal/session"
	"github.com/voiced/voiced/internal/voicedtest"
)

// awayStore is a conversation store whose shared part can be made
// unreachable: Load fails, as a Redis store's does; TakeMissed still
// returns what this instance holds (the memory store is all local).
type awayStore struct {
	*session.MemoryConversations
	away atomic.Bool
}

func (s *awayStore) Load(ctx context.Context, id string) (session.Conversation, bool, error) {
	if s.away.Load() {
		return session.Conversation{}, false, session.ErrStoreUnavailable
	}
	return s.MemoryConversations.Load(ctx, id)
}

// TestResumedFalseStillDeliversHandedOverTerminal: the network drops
// while a request whose final frame voiced has runs on, and the resume
// finds the store away: voiced answers "resumed": false (same
// conversation) and, as protocol.md documents, still hands the request's
// terminal to the new session as soon as it is decided. The client must
// give it to the request, not end the request with ErrConnectionLost at
// session.ready and route the result to OnUnrouted.
func TestResumedFalseStillDeliversHandedOverTerminal(t *testing.T) {
	ctx := testCtx(t)
	store := &awayStore{MemoryConversations: session.NewMemoryConversations(time.Hour)}
	// The answer takes about a second after the final frame: it is
	// decided well after the client has resumed.
	slow := quick
	slow.LLMMedian = time.Second
	addr, _ := voicedtest.StartConfig(t, slow, session.Config{Conversations: store})
	p := voicedtest.NewProxy(t, addr)
	readies := make(chan client.SessionReady, 4)
	var unrouted atomic.Int32
	c := dial(ctx, t, p.Addr, client.Config{
		Reconnect: client.Reconnect{Initial: 10 * time.Millisecond, Max: 50 * time.Millisecond},
		OnConnect: func(r client.SessionReady) { readies <- r },
		OnUnrouted: func(ev client.Event) {
			if ev.Terminal() {
				unrouted.Add(1)
			}
		},
	})
	first := <-readies
	classified := make(chan struct{}, 1)
	r, err := c.Open("runs-on", func(ev client.Event) {
		if ev.Type == client.TypeIntent { // after the final frame
			select {
			case classified <- struct{}{}:
			default:
			}
		}
	})
	require.NoError(t, err)
	sendAll(ctx, t, r, tone(5), c.DeadlineIn(1500*time.Millisecond))
	select {
	case <-classified:
	case <-ctx.Done():
		t.Fatal("no intent")
	}
	store.away.Store(true)
	p.Cut()

	second := <-readies
	require.False(t, second.Resumed, "the store is away")
	require.Equal(t, first.ConversationID, second.ConversationID)

	term, err := r.Wait(ctx)
	require.NoError(t, err, "the terminal voiced hands over to the resumed:false session")
	require.Equal(t, client.TypeResult, term.Type, "%s", term.Raw)
	require.Zero(t, unrouted.Load())
}
