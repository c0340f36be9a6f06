package openai_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/voiced/voiced/internal/stages/llm/llmtest"
	"github.com/voiced/voiced/internal/stages/llm/openai"
	"github.com/voiced/voiced/internal/stages/llm/provider"
)

const testTimeout = 10 * time.Second

const key = "sk-test-SECRET-0123456789"

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newClient(t *testing.T, srv *llmtest.Server, field string) *openai.Client {
	t.Helper()
	c, err := openai.New(openai.Config{BaseURL: srv.URL + "/v1", Model: "gpt-test", APIKey: key, MaxTokensField: field, HTTPClient: llmtest.HTTPClient(t)})
	require.NoError(t, err)
	return c
}

var req = llmtest.Conversation()

func TestRequestWireFormat(t *testing.T) {
	for _, field := range []string{openai.FieldMaxCompletionTokens, openai.FieldMaxTokens, openai.FieldBoth} {
		t.Run(field, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
			defer cancel()
			srv := llmtest.NewServer("openai", nil, llmtest.OpenAIOK("gpt-test-2024", "Go to ", "settings."))
			defer srv.Close()
			var got strings.Builder
			res, err := newClient(t, srv, field).Stream(ctx, req, func(p string) { got.WriteString(p) })
			require.NoError(t, err)
			require.Equal(t, "Go to settings.", got.String())
			require.Equal(t, provider.FinishStop, res.FinishReason)
			require.Equal(t, "gpt-test-2024", res.Model)
			require.Equal(t, "req_fake", res.RequestID)
			require.Equal(t, 8, res.InputTokens)
			require.Equal(t, 2, res.OutputTokens)

			rq := srv.Requests()
			require.Len(t, rq, 1)
			require.Equal(t, "/v1/chat/completions", rq[0].Path)
			require.Equal(t, "Bearer "+key, rq[0].Header.Get("Authorization"))
			b := rq[0].Body
			require.Equal(t, "gpt-test", b["model"])
			require.Equal(t, true, b["stream"])
			require.Equal(t, map[string]any{"include_usage": true}, b["stream_options"])
			msgs := b["messages"].([]any)
			require.Len(t, msgs, 4)
			require.Equal(t, map[string]any{"role": "system", "content": "be brief"}, msgs[0])
			require.Equal(t, map[string]any{"role": "user", "content": "reset my password"}, msgs[3])
			_, hasMCT := b["max_completion_tokens"]
			_, hasMT := b["max_tokens"]
			require.Equal(t, field != openai.FieldMaxTokens, hasMCT)
			require.Equal(t, field != openai.FieldMaxCompletionTokens, hasMT)
			if hasMCT {
				require.EqualValues(t, 42, b["max_completion_tokens"])
			}
			if hasMT {
				require.EqualValues(t, 42, b["max_tokens"])
			}
		})
	}
}

func TestDefaultMaxTokensField(t *testing.T) {
	// OpenAI itself needs max_completion_tokens; other bases (Ollama) read only max_tokens.
	srv := llmtest.NewServer("ollama", nil, llmtest.OpenAIOK("llama3", "ok."))
	defer srv.Close()
	c := newClient(t, srv, "")
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	_, err := c.Stream(ctx, req, func(string) {})
	require.NoError(t, err)
	_, hasMT := srv.Requests()[0].Body["max_tokens"]
	require.True(t, hasMT)
	_, err = openai.New(openai.Config{MaxTokensField: "max_toks"})
	require.Error(t, err)
}

func stream(t *testing.T, srv *llmtest.Server) llmtest.StreamFunc {
	return newClient(t, srv, "").Stream
}

func TestFaults(t *testing.T) {
	tests := []struct {
		name       string
		reply      llmtest.Reply
		kind       provider.Kind
		code       string
		retryAfter time.Duration
		text       string
		finish     string
	}{
		{"429 retry-after-ms", llmtest.OpenAIStatus(429, map[string]string{"retry-after-ms": "250"}, "Rate limit reached", "requests", "rate_limit_exceeded"), provider.KindRateLimit, "rate_limit_exceeded", 250 * time.Millisecond, "", ""},
		{"429 retry-after seconds", llmtest.OpenAIStatus(429, map[string]string{"retry-after": "2"}, "Rate limit reached", "tokens", "rate_limit_exceeded"), provider.KindRateLimit, "rate_limit_exceeded", 2 * time.Second, "", ""},
		{"429 quota", llmtest.OpenAIStatus(429, nil, "You exceeded your current quota", "insufficient_quota", "insufficient_quota"), provider.KindQuota, "insufficient_quota", 0, "", ""},
		{"500", llmtest.OpenAIStatus(500, nil, "server error", "server_error", nil), provider.KindTransient, "server_error", 0, "", ""},
		{"503 plain body", llmtest.Status(503, nil, "Slow Down"), provider.KindTransient, "", 0, "", ""},
		{"400", llmtest.OpenAIStatus(400, nil, "Unsupported parameter: 'max_tokens'", "invalid_request_error", "unsupported_parameter"), provider.KindInvalidRequest, "unsupported_parameter", 0, "", ""},
		{"400 integer code (vLLM)", llmtest.OpenAIStatus(400, nil, "bad", "BadRequestError", 400), provider.KindInvalidRequest, "400", 0, "", ""},
		{"401", llmtest.OpenAIStatus(401, nil, "Incorrect API key provided: "+key, "invalid_request_error", "invalid_api_key"), provider.KindAuth, "invalid_api_key", 0, "", ""},
		{"401 code echoing the key", llmtest.OpenAIStatus(401, nil, "no", "invalid_request_error", "bad_key_"+key), provider.KindAuth, "bad_key_[redacted]", 0, "", ""},
		{"403 region", llmtest.OpenAIStatus(403, nil, "Country, region, or territory not supported", "request_forbidden", "unsupported_country_region_territory"), provider.KindAuth, "unsupported_country_region_territory", 0, "", ""},
		{"404 model", llmtest.OpenAIStatus(404, nil, "The model `x` does not exist", "invalid_request_error", "model_not_found"), provider.KindModelNotFound, "model_not_found", 0, "", ""},
		{"404 ollama model", llmtest.OpenAIStatus(404, nil, "model \"x\" not found, try pulling it first", "not_found_error", nil), provider.KindModelNotFound, "not_found_error", 0, "", ""},
		{"mid-stream error", llmtest.Stream(append(llmtest.OpenAIChunks("m", "stop", "Hello")[:2], llmtest.OpenAIMidStreamError("overloaded", "server_error")), llmtest.StreamOpts{}), provider.KindTransient, "server_error", 0, "Hello", ""},
		{"content filter", llmtest.Stream(llmtest.OpenAIChunks("m", "content_filter"), llmtest.StreamOpts{}), provider.KindPolicy, "content_filter", 0, "", ""},
		{"refusal", llmtest.Stream(llmtest.OpenAIRefusal("m"), llmtest.StreamOpts{}), provider.KindPolicy, "refusal", 0, "", ""},
		{"length", llmtest.Stream(llmtest.OpenAIChunks("m", "length", "To reset"), llmtest.StreamOpts{}), provider.KindUnknown, "", 0, "To reset", provider.FinishLength},
		{"malformed", llmtest.Stream([]string{"data: {not json\n\n"}, llmtest.StreamOpts{}), provider.KindMalformed, "", 0, "", ""},
		{"no [DONE]", llmtest.Stream(llmtest.OpenAIChunks("m", "stop", "Hi")[:2], llmtest.StreamOpts{}), provider.KindTransient, "", 0, "Hi", ""},
		{"dropped mid-stream", llmtest.Stream(llmtest.OpenAIChunks("m", "stop", "Hi", "there"), llmtest.StreamOpts{CutAfter: 2, Cut: llmtest.CutDrop}), provider.KindTransient, "", 0, "Hi", ""},
		{"dropped connection", llmtest.Drop(), provider.KindTransient, "", 0, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			llmtest.CheckFault(t, testTimeout, "openai", key, stream, tt.reply, llmtest.Outcome{Kind: tt.kind, Code: tt.code, RetryAfter: tt.retryAfter, Text: tt.text, Finish: tt.finish})
		})
	}
}

func TestCancelMidStreamClosesUpstream(t *testing.T) {
	srv := llmtest.NewServer("openai", nil, llmtest.Stream(llmtest.OpenAIChunks("m", "stop", "Hello", "world"), llmtest.StreamOpts{CutAfter: 2, Cut: llmtest.CutStall}))
	defer srv.Close()
	llmtest.CheckCancelClosesUpstream(t, testTimeout, srv, newClient(t, srv, "").Stream)
}

// TestUsage checks that the tokens come from the stream's usage chunk
// (stream_options.include_usage), and that a stream cut before it
// reports none rather than a guess.
func TestUsage(t *testing.T) {
	events := llmtest.OpenAIChunksUsage("gpt-test", "stop", llmtest.Usage{Input: 1234, Output: 56}, "Go to ", "settings.")
	for _, tc := range []struct {
		name    string
		reply   llmtest.Reply
		ok      bool
		in, out int
	}{
		{"usage chunk before DONE", llmtest.Stream(events, llmtest.StreamOpts{}), true, 1234, 56},
		{"cut before the usage chunk", llmtest.Stream(events, llmtest.StreamOpts{CutAfter: len(events) - 2, Cut: llmtest.CutDrop}), false, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
			defer cancel()
			srv := llmtest.NewServer("openai", nil, tc.reply)
			defer srv.Close()
			res, err := newClient(t, srv, openai.FieldBoth).Stream(ctx, req, func(string) {})
			require.Equal(t, tc.ok, err == nil, "err = %v", err)
			require.Equal(t, tc.in, res.InputTokens)
			require.Equal(t, tc.out, res.OutputTokens)
		})
	}
}
