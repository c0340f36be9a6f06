package llm

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/stages/llm/llmtest"
)

// TestStallMidAnswerFinishOnEveryChunk: some Gemini models put a finish
// reason on every chunk (the adapter keeps reading to the end of the
// stream for them). A stall of such a stream in the middle of its answer
// is not the late tail of a finished one: the answer so far is cut
// (stream_interrupted), not reported complete. A stream whose finish
// reason was followed by more text shows that its finish reasons do not
// mark the end.
func TestStallMidAnswerFinishOnEveryChunk(t *testing.T) {
	evs := llmtest.GeminiChunks("gemini-model", "STOP", true, true, "Open Settings, ", "then ", "Security.")
	f := newFixture(t, testConfig(), link{"gemini", []llmtest.Reply{llmtest.Stream(evs, llmtest.StreamOpts{CutAfter: 2, Cut: llmtest.CutStall})}})
	o := f.generate(t, 3*time.Second)
	require.NoError(t, o.err)
	require.Equal(t, "Open Settings, then ", o.text)
	require.Contains(t, o.gen.Degradation, ReasonStreamInterrupted, "a stall mid-answer is no complete answer")
}
