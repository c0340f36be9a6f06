package session_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/pipeline"
	"github.com/voiced/voiced/internal/protocol"
	"github.com/voiced/voiced/internal/session"
)

// TestServerTurnIDsAcrossResume: a resumed session's server turns do not
// repeat the ids of the conversation's earlier session, whose turn (its
// speech over when the connection dropped) runs on and hands its terminal
// to the resumed session: each id gets exactly one terminal.
func TestServerTurnIDsAcrossResume(t *testing.T) {
	release := make(chan struct{})
	fake := holding(1, release) // the first session's turn waits for the test
	pcfg := pipeline.Config{}
	pcfg.LLM.Cap = 20 * time.Second
	h := newHarness(t, fake, pcfg, session.Config{MaxBudget: 30 * time.Second})
	pcm, _, _ := conversation(t, 800, "where is my order")

	a := h.dial()
	a.serverTurns(`,"budgetMs":30000`).send(pcm)
	for llm := false; !llm; {
		select {
		case s := <-fake.started:
			llm = s == pipeline.StageLLM
		case <-h.ctx.Done():
			t.Fatal("the first session's turn never reached its LLM stage")
		}
	}
	a.conn.CloseNow() // its t-1 runs on: its speech has ended

	b := h.dialResume(a.ready.ResumeToken)
	require.True(t, b.ready.Resumed)
	b.serverTurns(`,"budgetMs":30000`).send(pcm)
	var mine string
	for mine == "" {
		if m := b.next(); m.Type == protocol.TypeSpeechStarted {
			mine = m.RequestID
		}
	}
	require.NotEqual(t, protocol.TurnID(1), mine, "the resumed session's first turn")
	require.Equal(t, protocol.ResumedTurnID(b.ready.SessionID, 1), mine)
	close(release) // the first session's t-1 answers now

	terminals := map[string]int{}
	for terminals[protocol.TurnID(1)] == 0 || terminals[mine] == 0 {
		if m := b.next(); protocol.Terminal(m.Type) {
			terminals[m.RequestID]++
		}
	}
	for _, m := range b.ping() { // everything sent so far
		if protocol.Terminal(m.Type) {
			terminals[m.RequestID]++
		}
	}
	require.Equal(t, map[string]int{protocol.TurnID(1): 1, mine: 1}, terminals)
}
