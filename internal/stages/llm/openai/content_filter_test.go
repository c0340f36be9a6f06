package openai_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/stages/llm/llmtest"
	"github.com/voiced/voiced/internal/stages/llm/provider"
)

// TestContentFilterKeepsUsage: a content_filter finish is a policy block,
// but the tokens are billed all the same, and the usage chunk that
// include_usage adds comes after the finish chunk: the adapter must read
// it so the spend (and the cost cap) counts the attempt.
func TestContentFilterKeepsUsage(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	srv := llmtest.NewServer("openai", nil, llmtest.Stream(llmtest.OpenAIChunksUsage("gpt-test", "content_filter", llmtest.Usage{Input: 30, Output: 5}, "Well, "), llmtest.StreamOpts{}))
	defer srv.Close()
	res, err := newClient(t, srv, "").Stream(ctx, req, func(string) {})
	require.Equal(t, provider.KindPolicy, provider.KindOf(err), "err = %v", err)
	pe, ok := err.(*provider.Error)
	require.True(t, ok)
	require.Equal(t, "content_filter", pe.Code)
	require.Equal(t, 30, res.InputTokens)
	require.Equal(t, 5, res.OutputTokens)
}
