package session_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/pipeline"
	"github.com/voiced/voiced/internal/session"
)

// awayStore is a conversation store that can be made unreachable; it
// counts the reads a resume makes.
type awayStore struct {
	*session.MemoryConversations
	away         atomic.Bool
	loads, takes atomic.Int32
	takesWaiting atomic.Int32 // takes with time to wait on a network
}

func (s *awayStore) Load(ctx context.Context, id string) (session.Conversation, bool, error) {
	s.loads.Add(1)
	if s.away.Load() {
		return session.Conversation{}, false, session.ErrStoreUnavailable
	}
	return s.MemoryConversations.Load(ctx, id)
}

func (s *awayStore) TakeMissed(ctx context.Context, id string) ([][]byte, error) {
	s.takes.Add(1)
	if ctx.Err() == nil {
		s.takesWaiting.Add(1)
	}
	if s.away.Load() {
		return nil, session.ErrStoreUnavailable
	}
	return s.MemoryConversations.TakeMissed(ctx, id)
}

// TestResumeSkipsReadsOfAStoreAway: a resume whose read at the upgrade
// found the store away makes no further read after session.ready that
// could wait on the network: the missed terminals are taken with a
// context already done (what the store holds here). Those
// reads run before the session reads its client's first message, so
// against a store that hangs (not yet found lost, each read taking its
// whole resume budget) they held a request sent right after
// session.ready for two budgets, out of its deadline. The session is
// told "resumed": false and goes on without history, as documented; its
// missed terminals stay in the store for the next resume.
func TestResumeSkipsReadsOfAStoreAway(t *testing.T) {
	store := &awayStore{MemoryConversations: session.NewMemoryConversations(time.Hour)}
	h := newHarness(t, &fakeStages{}, pipeline.Config{}, session.Config{Conversations: store})
	c := h.dial()
	c.conn.CloseNow()

	store.away.Store(true)
	store.loads.Store(0)
	c2 := h.dialResume(c.ready.ResumeToken)
	require.False(t, c2.ready.Resumed)
	require.Equal(t, c.ready.ConversationID, c2.ready.ConversationID)
	c2.ping() // read after the resume's reads, were there any

	require.EqualValues(t, 1, store.loads.Load(), "reads of the history: the upgrade's only")
	require.EqualValues(t, 1, store.takes.Load(), "takes of the missed terminals")
	require.Zero(t, store.takesWaiting.Load(), "takes that may wait")

	// A store that answers at the upgrade is read again after ready.
	store.away.Store(false)
	store.loads.Store(0)
	store.takes.Store(0)
	c3 := h.dialResume(c2.ready.ResumeToken)
	require.True(t, c3.ready.Resumed)
	c3.ping()
	require.EqualValues(t, 2, store.loads.Load())
	require.EqualValues(t, 1, store.takes.Load())
	require.EqualValues(t, 1, store.takesWaiting.Load())
}

// TestRefusedResumeReadsNoStore: a server that refuses an upgrade (full)
// answers a resume's 503 without reading the store: the read, up to a
// whole resume budget against a slow Redis, came before admission, so a
// burst of resumes at a full or saturated server cost a read each.
func TestRefusedResumeReadsNoStore(t *testing.T) {
	store := &awayStore{MemoryConversations: session.NewMemoryConversations(time.Hour)}
	h := newHarness(t, &fakeStages{}, pipeline.Config{}, session.Config{Conversations: store, MaxSessions: 1})
	c := h.dial() // the one slot
	_, resp, err := websocket.Dial(h.ctx, "ws"+strings.TrimPrefix(h.http.URL, "http")+"?resume="+url.QueryEscape(c.ready.ResumeToken), nil)
	require.Error(t, err)
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	require.Zero(t, store.loads.Load())

	c.conn.CloseNow()
	require.Eventually(t, func() bool { return h.srv.Sessions() == 0 }, testTimeout, time.Millisecond)
	c2 := h.dialResume(c.ready.ResumeToken)
	require.True(t, c2.ready.Resumed)
	c2.ping() // read after the resume's reads
	require.EqualValues(t, 2, store.loads.Load(), "at the upgrade, and again after ready")
}
