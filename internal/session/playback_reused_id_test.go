package session_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/pipeline"
	"github.com/voiced/voiced/internal/protocol"
)

// A client may open a request with an id an earlier, finished request
// had (one id for every utterance). A playback report for that id is
// about the latest request's audio: it cut every exchange of the history
// with that id, so the earlier answers became the latest one's heard part.
func TestPlaybackOfAReusedIDCutsOnlyItsLatestAnswer(t *testing.T) {
	answers := []string{"Your order shipped yesterday.", "Refunds take five days. They go to your card."}
	var n atomic.Int32
	fake := &fakeStages{generate: func(ctx context.Context, emit func(string)) (pipeline.Generation, error) {
		if i := int(n.Add(1)) - 1; i < len(answers) {
			emit(answers[i])
		} else {
			emit("Anything else?")
		}
		return pipeline.Generation{Provider: "fake"}, nil
	}}
	h := speechHarness(t, fake, pipeline.Config{})
	c := h.dial()
	c.speak("", 16000, "binary")
	for range answers {
		c.audio("utt", 0, true, time.Now().Add(roomy))
		term, _ := c.terminal("utt")
		require.Equal(t, protocol.TypeResult, term.Type)
	}
	// Nothing of the latest answer was heard.
	c.sendJSON(protocol.Playback{Type: protocol.TypePlayback, RequestID: "utt", PlayedMs: 0})
	c.audio("next", 0, true, time.Now().Add(roomy))
	c.terminal("next")
	fake.mu.Lock()
	hist := fake.reqs[2].History
	fake.mu.Unlock()
	require.Len(t, hist, 2)
	require.Equal(t, answers[0], hist[0].Assistant, "the earlier answer under that id is left as it was")
	require.Equal(t, "", hist[1].Assistant, "the latest answer is cut to what was heard")
}
