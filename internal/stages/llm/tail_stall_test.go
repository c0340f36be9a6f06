package llm

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/stages/llm/llmtest"
)

// TestLateTailAfterFinishIsComplete holds back what follows an answer's
// finish reason (OpenAI's usage chunk or [DONE], Anthropic's
// message_stop, the end of a Gemini stream) past the stall limit. The
// answer was complete: it is not degraded as interrupted, the provider is
// not blamed for a failure, and usage that came is counted. Before, the
// stall timer, reset by text only, cut it as a stalled stream.
func TestLateTailAfterFinishIsComplete(t *testing.T) {
	openaiEvs := llmtest.OpenAIChunksUsage("openai-model", "stop", llmtest.Usage{Input: 8, Output: 7}, "Open Settings, ", "then Security.")
	anthropicEvs := llmtest.AnthropicEventsUsage("anthropic-model", "end_turn", llmtest.Usage{Input: 25, Output: 7}, "Open Settings, ", "then Security.")
	geminiEvs := llmtest.GeminiChunksUsage("gemini-model", "STOP", true, false, llmtest.Usage{Input: 5, Output: 7}, "Open Settings, ", "then Security.")
	for _, tc := range []struct {
		name       string
		link       string
		events     []string
		cutAfter   int // events sent before the stall
		wantOutput float64
	}{
		// role, two pieces, finish: the usage chunk and [DONE] stall.
		{name: "openai usage late", link: "openai", events: openaiEvs, cutAfter: 4, wantOutput: 0},
		// ... and with the usage in: [DONE] stalls.
		{name: "openai [DONE] late", link: "openai", events: openaiEvs, cutAfter: 5, wantOutput: 7},
		// start, block start, ping, two pieces, block stop, message_delta:
		// message_stop stalls.
		{name: "anthropic message_stop late", link: "anthropic", events: anthropicEvs, cutAfter: 7, wantOutput: 7},
		// Both chunks sent, the stream is not closed.
		{name: "gemini end of stream late", link: "gemini", events: append(geminiEvs, ""), cutAfter: len(geminiEvs), wantOutput: 7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, testConfig(), link{tc.link, []llmtest.Reply{llmtest.Stream(tc.events, llmtest.StreamOpts{CutAfter: tc.cutAfter, Cut: llmtest.CutStall})}})
			o := f.generate(t, 3*time.Second)
			require.NoError(t, o.err)
			require.Equal(t, "Open Settings, then Security.", o.text)
			require.Equal(t, tc.link, o.gen.Provider)
			require.Empty(t, o.gen.Degradation, "a complete answer whose tail was late is not interrupted")
			model := tc.link + "-model"
			require.Equal(t, 1.0, testutil.ToFloat64(f.chain.m.successes.WithLabelValues(tc.link, model)))
			require.Equal(t, uint32(0), f.chain.slots[0].breaker.Counts().TotalFailures)
			require.Equal(t, tc.wantOutput, testutil.ToFloat64(f.chain.m.tokens.WithLabelValues(tc.link, model, "output")))
		})
	}
}
