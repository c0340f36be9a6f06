package session

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/pipeline"
)

// TestCatchUpCountAfterFailedLoad: the load at the upgrade failed (store
// away: resumed false, count 0); the catch-up read finds the history, 10
// turns answered, the last 4 in its window. The session answers one more:
// the conversation has answered 11, not 4+1.
func TestCatchUpCountAfterFailedLoad(t *testing.T) {
	ctx, srv, _, s := lateSession(t)
	var hist []pipeline.Turn
	for _, n := range []string{"7", "8", "9", "10"} {
		hist = append(hist, pipeline.Turn{User: "u" + n, Assistant: "a" + n})
	}
	require.NoError(t, srv.cfg.Conversations.Save(ctx, s.conv, Conversation{Turns: hist, Answered: 10}))

	// What resolveConversation returns when its Load errs.
	s.startConversation(resumption{conv: s.conv, asked: true})
	s.catchUp(ctx)
	save := s.remember("", pipeline.Turn{User: "u11", Assistant: "a11"}, nil)
	require.NotNil(t, save)
	save(ctx)

	got, ok, err := srv.cfg.Conversations.Load(ctx, s.conv)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, 11, got.Answered, "window %v", got.Turns)
}

// TestHandOffRacesCatchUp: a turn the old session saved and then hands
// over while the new session's catch-up merges the same turn from the
// store: handOff's "held?" check and its remember are two critical
// sections, so both can add it: the turn twice in the window, counted
// twice.
func TestHandOffRacesCatchUp(t *testing.T) {
	ctx, srv, _, _ := lateSession(t)
	a := pipeline.Turn{User: "a", Assistant: "A"}
	turn := pipeline.Turn{User: "t", Assistant: "T"}
	require.NoError(t, srv.cfg.Conversations.Save(ctx, "c", Conversation{Turns: []pipeline.Turn{a, turn}, Answered: 2}))
	const rounds = 20000
	twice := 0
	for i := range rounds {
		s := newSession(srv, "s2", srv.log)
		s.conv = "c"
		s.startConversation(resumption{conv: "c", asked: true, resumed: true, turns: []pipeline.Turn{a}, count: 1})
		start := make(chan struct{})
		done := make(chan struct{})
		go func() {
			<-start
			s.handOff(turn, 2) // the old session's second
			close(done)
		}()
		close(start)
		s.catchUp(ctx)
		<-done
		s.mu.Lock()
		if s.answered != 2 {
			twice++
			if twice == 1 {
				t.Logf("round %d: answered %d, window %v", i, s.answered, s.turnsLocked())
			}
		}
		s.mu.Unlock()
	}
	require.Zero(t, twice, "of %d rounds, the handed-off turn was counted twice", rounds)
}
