package session

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/pipeline"
)

// TestHandOffRepeatedTurnKept: the client resumed (live) while its old
// session still ran a request, which answers the same exchange as one
// the history holds already (a greeting asked twice): two turns. The
// hand-over to the live session left it out as a turn held already,
// which only a copy of the store holding it (its load or catch-up came
// after the old session's save) can mean.
func TestHandOffRepeatedTurnKept(t *testing.T) {
	ctx, srv, _, _ := lateSession(t)
	g := pipeline.Turn{User: "hello", Assistant: "Hello, how can I help?"}
	require.NoError(t, srv.cfg.Conversations.Save(ctx, "c", Conversation{Turns: []pipeline.Turn{g}, Answered: 1}))
	res := resumption{conv: "c", asked: true, resumed: true, turns: []pipeline.Turn{g}, count: 1}
	old := newSession(srv, "old", srv.log)
	old.startConversation(res)
	old.detached = true // its connection dropped
	live := newSession(srv, "live", srv.log)
	live.startConversation(res)
	srv.mu.Lock()
	srv.live["c"] = live
	srv.mu.Unlock()

	save := old.remember("r2", g, nil) // the greeting again: turn 2
	require.NotNil(t, save, "the turn is handed over")
	save(ctx)
	require.Equal(t, []pipeline.Turn{g, g}, live.history())
	got, ok, err := srv.cfg.Conversations.Load(ctx, "c")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, 2, got.Answered)
	require.Equal(t, []pipeline.Turn{g, g}, got.Turns)
}
