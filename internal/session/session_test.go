package session_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/pipeline"
	"github.com/voiced/voiced/internal/protocol"
	"github.com/voiced/voiced/internal/session"
)

func TestHappyPath(t *testing.T) {
	h := newHarness(t, &fakeStages{}, pipeline.Config{}, session.Config{})
	c := h.dial()
	require.Equal(t, protocol.Name, c.ready.Protocol)
	require.EqualValues(t, 1700, c.ready.MaxBudgetMs)
	require.Equal(t, 16000, c.ready.Audio.SampleRate)

	dl := time.Now().Add(2 * time.Second)
	c.audio("r1", 0, false, dl)
	c.audio("r1", 1, true, dl)
	term, before := c.terminal("r1")
	res := resultOf(t, term)
	require.Equal(t, "where is my order", res.Transcript)
	require.Equal(t, "order_status", res.Intent.Name)
	require.Equal(t, "Your order ships today.", res.Answer)
	require.False(t, res.Degraded)
	require.Equal(t, "fake", res.Provider)
	require.NotNil(t, res.Budget.LLMStartLeftMs)

	var types []string
	for _, m := range before {
		types = append(types, m.Type)
	}
	require.Equal(t, []string{"transcript", "intent", "retrieval", "answer.delta", "answer.delta"}, sortStable(types))
	require.Empty(t, c.ping(), "nothing follows the terminal message")
}

// sortStable puts intent before retrieval: they run in parallel, so their
// order on the wire is free.
func sortStable(types []string) []string {
	for i := 0; i+1 < len(types); i++ {
		if types[i] == "retrieval" && types[i+1] == "intent" {
			types[i], types[i+1] = types[i+1], types[i]
		}
	}
	return types
}
