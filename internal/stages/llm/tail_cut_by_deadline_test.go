package llm

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/stages/llm/llmtest"
)

// TestLateTailCutByTheAttemptsEndIsComplete is TestLateTailAfterFinishIsComplete
// with the attempt's own end coming before the stall limit: the provider's
// cap, or the request's deadline minus the reserve. The finish reason had
// come, so the answer is complete all the same: not interrupted, and no
// timeout held against the provider.
func TestLateTailCutByTheAttemptsEndIsComplete(t *testing.T) {
	openaiEvs := llmtest.OpenAIChunksUsage("openai-model", "stop", llmtest.Usage{Input: 8, Output: 7}, "Open Settings, ", "then Security.")
	anthropicEvs := llmtest.AnthropicEventsUsage("anthropic-model", "end_turn", llmtest.Usage{Input: 25, Output: 7}, "Open Settings, ", "then Security.")
	geminiEvs := llmtest.GeminiChunksUsage("gemini-model", "STOP", true, false, llmtest.Usage{Input: 5, Output: 7}, "Open Settings, ", "then Security.")
	for _, end := range []struct {
		name   string
		cap    time.Duration
		budget time.Duration
	}{
		// The attempt's end leaves the fake's events, all written at once,
		// seconds to arrive on a loaded machine under -race: at 0.8 s the
		// finish reason came after the deadline in one of ten runs there,
		// and the answer was rightly interrupted.
		{"provider cap", 2 * time.Second, 5 * time.Second},
		{"request deadline", 5 * time.Second, 2 * time.Second},
	} {
		for _, tc := range []struct {
			name     string
			link     string
			events   []string
			cutAfter int
		}{
			{name: "openai [DONE] late", link: "openai", events: openaiEvs, cutAfter: 5},
			{name: "anthropic message_stop late", link: "anthropic", events: anthropicEvs, cutAfter: 7},
			{name: "gemini end of stream late", link: "gemini", events: append(geminiEvs, ""), cutAfter: len(geminiEvs)},
		} {
			t.Run(end.name+"/"+tc.name, func(t *testing.T) {
				cfg := testConfig()
				cfg.StallLimit = 10 * time.Second
				cfg.OpenAI.Cap = end.cap
				f := newFixture(t, cfg, link{tc.link, []llmtest.Reply{llmtest.Stream(tc.events, llmtest.StreamOpts{CutAfter: tc.cutAfter, Cut: llmtest.CutStall})}})
				o := f.generate(t, end.budget)
				require.NoError(t, o.err)
				require.Equal(t, "Open Settings, then Security.", o.text)
				require.Equal(t, tc.link, o.gen.Provider)
				require.Empty(t, o.gen.Degradation, "a complete answer whose tail was late is not interrupted")
				model := tc.link + "-model"
				require.Equal(t, 1.0, testutil.ToFloat64(f.chain.m.successes.WithLabelValues(tc.link, model)))
				require.Equal(t, uint32(0), f.chain.slots[0].breaker.Counts().TotalFailures)
			})
		}
	}
}
