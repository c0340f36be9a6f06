package anthropic_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/voiced/voiced/internal/stages/llm/anthropic"
	"github.com/voiced/voiced/internal/stages/llm/llmtest"
	"github.com/voiced/voiced/internal/stages/llm/provider"
)

const testTimeout = 10 * time.Second

const key = "sk-ant-test-SECRET-0123456789"

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newClient(t *testing.T, srv *llmtest.Server) *anthropic.Client {
	t.Helper()
	return anthropic.New(anthropic.Config{BaseURL: srv.URL + "/v1", Model: "claude-test", APIKey: key, HTTPClient: llmtest.HTTPClient(t)})
}

var req = llmtest.Conversation()

func TestRequestWireFormat(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	srv := llmtest.NewServer("anthropic", nil, llmtest.AnthropicOK("claude-test-20250101", "Go to ", "settings."))
	defer srv.Close()
	var got strings.Builder
	res, err := newClient(t, srv).Stream(ctx, req, func(p string) { got.WriteString(p) })
	require.NoError(t, err)
	require.Equal(t, "Go to settings.", got.String())
	require.Equal(t, provider.FinishStop, res.FinishReason)
	require.Equal(t, "claude-test-20250101", res.Model)
	require.Equal(t, "req_fake", res.RequestID)
	require.Equal(t, 25, res.InputTokens)
	require.Equal(t, 3, res.OutputTokens)

	rq := srv.Requests()[0]
	require.Equal(t, "/v1/messages", rq.Path)
	require.Equal(t, key, rq.Header.Get("X-Api-Key"))
	require.Empty(t, rq.Header.Get("Authorization"))
	require.Equal(t, "2023-06-01", rq.Header.Get("Anthropic-Version"))
	require.Equal(t, "claude-test", rq.Body["model"])
	require.EqualValues(t, 42, rq.Body["max_tokens"])
	require.Equal(t, "be brief", rq.Body["system"])
	require.Equal(t, true, rq.Body["stream"])
	msgs := rq.Body["messages"].([]any)
	require.Len(t, msgs, 3)
	require.Equal(t, map[string]any{"role": "assistant", "content": "hello"}, msgs[1])
}

func stream(t *testing.T, srv *llmtest.Server) llmtest.StreamFunc {
	return newClient(t, srv).Stream
}

func TestFaults(t *testing.T) {
	body := func(stop string, pieces ...string) []string {
		return llmtest.AnthropicEvents("claude-test", stop, pieces...)
	}
	tests := []struct {
		name       string
		reply      llmtest.Reply
		kind       provider.Kind
		code       string
		retryAfter time.Duration
		text       string
		finish     string
	}{
		{"429 retry-after", llmtest.AnthropicStatus(429, map[string]string{"retry-after": "3", "request-id": "req_1"}, "rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit"), provider.KindRateLimit, "rate_limit_error", 3 * time.Second, "", ""},
		{"429 retry-after-ms", llmtest.AnthropicStatus(429, map[string]string{"retry-after-ms": "120"}, "rate_limit_error", "slow down"), provider.KindRateLimit, "rate_limit_error", 120 * time.Millisecond, "", ""},
		{"529 overloaded", llmtest.AnthropicStatus(529, nil, "overloaded_error", "Overloaded"), provider.KindTransient, "overloaded_error", 0, "", ""},
		{"500", llmtest.AnthropicStatus(500, nil, "api_error", "Internal server error"), provider.KindTransient, "api_error", 0, "", ""},
		{"400 credit balance", llmtest.AnthropicStatus(400, nil, "invalid_request_error", "Your credit balance is too low to access the Anthropic API."), provider.KindQuota, "invalid_request_error", 0, "", ""},
		{"402 billing", llmtest.AnthropicStatus(402, nil, "billing_error", "billing"), provider.KindQuota, "billing_error", 0, "", ""},
		{"400", llmtest.AnthropicStatus(400, nil, "invalid_request_error", "messages: roles must alternate"), provider.KindInvalidRequest, "invalid_request_error", 0, "", ""},
		{"401", llmtest.AnthropicStatus(401, nil, "authentication_error", "invalid x-api-key "+key), provider.KindAuth, "authentication_error", 0, "", ""},
		{"403", llmtest.AnthropicStatus(403, nil, "permission_error", "no access"), provider.KindAuth, "permission_error", 0, "", ""},
		{"403 type echoing the key", llmtest.AnthropicStatus(403, nil, "denied_"+key, "no access"), provider.KindAuth, "denied_[redacted]", 0, "", ""},
		{"404 model", llmtest.AnthropicStatus(404, nil, "not_found_error", "model: claude-nope"), provider.KindModelNotFound, "not_found_error", 0, "", ""},
		{"mid-stream overloaded after 200", llmtest.Stream(append(body("end_turn", "Hello")[:4], llmtest.AnthropicErrorEvent("overloaded_error", "Overloaded")), llmtest.StreamOpts{}), provider.KindTransient, "overloaded_error", 0, "Hello", ""},
		{"refusal", llmtest.Stream(body("refusal"), llmtest.StreamOpts{}), provider.KindPolicy, "refusal", 0, "", ""},
		{"max_tokens", llmtest.Stream(body("max_tokens", "To reset"), llmtest.StreamOpts{}), provider.KindUnknown, "", 0, "To reset", provider.FinishLength},
		{"malformed", llmtest.Stream([]string{"event: message_start\ndata: {oops\n\n"}, llmtest.StreamOpts{}), provider.KindMalformed, "", 0, "", ""},
		{"cut before message_stop", llmtest.Stream(body("end_turn", "Hi")[:4], llmtest.StreamOpts{}), provider.KindTransient, "", 0, "Hi", ""},
		{"dropped", llmtest.Drop(), provider.KindTransient, "", 0, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			llmtest.CheckFault(t, testTimeout, "anthropic", key, stream, tt.reply, llmtest.Outcome{Kind: tt.kind, Code: tt.code, RetryAfter: tt.retryAfter, Text: tt.text, Finish: tt.finish})
		})
	}
}

func TestCancelMidStreamClosesUpstream(t *testing.T) {
	srv := llmtest.NewServer("anthropic", nil, llmtest.Stream(llmtest.AnthropicEvents("claude-test", "end_turn", "Hello", "world"), llmtest.StreamOpts{CutAfter: 4, Cut: llmtest.CutStall}))
	defer srv.Close()
	llmtest.CheckCancelClosesUpstream(t, testTimeout, srv, newClient(t, srv).Stream)
}

// TestUsage checks the tokens of message_start (input, and an output of
// 1 so far) and of message_delta (cumulative output; input too when the
// API repeats it there).
func TestUsage(t *testing.T) {
	events := llmtest.AnthropicEventsUsage("claude-test", "end_turn", llmtest.Usage{Input: 2048, Output: 77}, "Go to ", "settings.")
	withInput := append([]string(nil), events...)
	withInput[len(withInput)-2] = llmtest.SSE("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"input_tokens":2050,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":78}}`, "\n")
	for _, tc := range []struct {
		name    string
		reply   llmtest.Reply
		ok      bool
		in, out int
	}{
		{"message_start and message_delta", llmtest.Stream(events, llmtest.StreamOpts{}), true, 2048, 77},
		{"input repeated in message_delta", llmtest.Stream(withInput, llmtest.StreamOpts{}), true, 2050, 78},
		{"cut before message_delta", llmtest.Stream(events, llmtest.StreamOpts{CutAfter: len(events) - 2, Cut: llmtest.CutDrop}), false, 2048, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
			defer cancel()
			srv := llmtest.NewServer("anthropic", nil, tc.reply)
			defer srv.Close()
			res, err := newClient(t, srv).Stream(ctx, req, func(string) {})
			require.Equal(t, tc.ok, err == nil, "err = %v", err)
			require.Equal(t, tc.in, res.InputTokens)
			require.Equal(t, tc.out, res.OutputTokens)
		})
	}
}
