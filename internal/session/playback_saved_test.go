package session_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/pipeline"
	"github.com/voiced/voiced/internal/protocol"
	"github.com/voiced/voiced/internal/session"
)

// savesReported is a memory store that reports each history it saves.
type savesReported struct {
	*session.MemoryConversations
	saved chan session.Conversation
}

func (s savesReported) Save(ctx context.Context, id string, c session.Conversation) error {
	err := s.MemoryConversations.Save(ctx, id, c)
	select {
	case s.saved <- c:
	default:
	}
	return err
}

// TestPlaybackCutIsSaved: a playback report cuts the answer in the
// session's history to what was heard, and that history is what a
// resumed session continues. The cut was kept in the session only, and
// saved with the next answered turn: a client that barged in, lost its
// connection and resumed before another answer had the whole answer back
// in its history, words the user never heard.
func TestPlaybackCutIsSaved(t *testing.T) {
	fake := &fakeStages{generate: func(ctx context.Context, emit func(string)) (pipeline.Generation, error) {
		emit("Your order shipped yesterday. It arrives on Friday.")
		return pipeline.Generation{Provider: "fake"}, nil
	}}
	store := savesReported{session.NewMemoryConversations(time.Hour), make(chan session.Conversation, 16)}
	pcfg := pipeline.Config{}
	pcfg.TTS.Cap = roomy - time.Second
	h := newHarness(t, fake, pcfg, session.Config{Speech: flite(t), MaxBudget: roomy, Conversations: store})
	c := h.dial()
	c.speak("", 16000, "binary")
	c.audio("r1", 0, true, time.Now().Add(roomy))
	term, _ := c.terminal("r1")
	require.Equal(t, protocol.TypeResult, term.Type)
	saved := <-store.saved // with the result
	require.Len(t, saved.Turns, 1)
	require.NotEmpty(t, saved.Turns[0].Assistant)

	c.sendJSON(protocol.Playback{Type: protocol.TypePlayback, RequestID: "r1", PlayedMs: 0}) // nothing heard
	select {
	case saved = <-store.saved:
		require.Len(t, saved.Turns, 1)
		require.Empty(t, saved.Turns[0].Assistant, "the saved answer is cut to what was heard")
	case <-h.ctx.Done():
		t.Fatal("the cut history was never saved")
	}
}
