package gemini_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/stages/llm/gemini"
	"github.com/voiced/voiced/internal/stages/llm/llmtest"
	"github.com/voiced/voiced/internal/stages/llm/provider"
)

// TestModelsPrefixedName: a model configured the way the Gemini API names
// it ("models/gemini-2.5-flash", which go-genai and thinking() accept)
// must be requested at models/{model}, not models/models%2F{model}.
func TestModelsPrefixedName(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	srv := llmtest.NewServer("gemini", nil, llmtest.GeminiOK("gemini-2.5-flash", "Fine."))
	defer srv.Close()
	c := gemini.New(gemini.Config{BaseURL: srv.URL, Model: "models/gemini-2.5-flash", APIKey: key, HTTPClient: llmtest.HTTPClient(t)})
	_, err := c.Stream(ctx, req, func(string) {})
	require.NoError(t, err)
	rq := srv.Requests()[0]
	require.Equal(t, "/v1beta/models/gemini-2.5-flash:streamGenerateContent", rq.Path)
}

// TestRetryDelayBounded: RetryAfter is at most provider.MaxRetryAfter
// whatever the server asks (provider.RetryAfter's contract, which the
// cooldowns rely on); Gemini's RetryInfo.retryDelay bypassed it: a huge
// delay was taken as is, and one too large for a Duration as no wait.
func TestRetryDelayBounded(t *testing.T) {
	for _, delay := range []string{"3600000s", "99999999999999999s"} {
		t.Run(delay, func(t *testing.T) {
			llmtest.CheckFault(t, testTimeout, "gemini", key, func(t *testing.T, srv *llmtest.Server) llmtest.StreamFunc { return newClient(t, srv).Stream },
				llmtest.GeminiRateLimited(delay, "GenerateRequestsPerMinutePerProjectPerModel-FreeTier"),
				llmtest.Outcome{Kind: provider.KindRateLimit, Code: "RESOURCE_EXHAUSTED", RetryAfter: provider.MaxRetryAfter})
		})
	}
}
