package gemini_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/voiced/voiced/internal/stages/llm/gemini"
	"github.com/voiced/voiced/internal/stages/llm/llmtest"
	"github.com/voiced/voiced/internal/stages/llm/provider"
)

const testTimeout = 10 * time.Second

const key = "AIzaTEST-SECRET-0123456789"

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newClient(t *testing.T, srv *llmtest.Server) *gemini.Client {
	t.Helper()
	return gemini.New(gemini.Config{BaseURL: srv.URL + "/v1beta", Model: "gemini-test", APIKey: key, HTTPClient: llmtest.HTTPClient(t)})
}

var req = llmtest.Conversation()

func TestRequestWireFormat(t *testing.T) {
	for _, tc := range []struct {
		name string
		crlf bool
	}{{"crlf", true}, {"lf", false}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
			defer cancel()
			srv := llmtest.NewServer("gemini", nil, llmtest.Stream(llmtest.GeminiChunks("gemini-test-001", "STOP", tc.crlf, false, "Go to ", "settings."), llmtest.StreamOpts{}))
			defer srv.Close()
			var got strings.Builder
			res, err := newClient(t, srv).Stream(ctx, req, func(p string) { got.WriteString(p) })
			require.NoError(t, err)
			require.Equal(t, "Go to settings.", got.String())
			require.Equal(t, provider.FinishStop, res.FinishReason)
			require.Equal(t, "gemini-test-001", res.Model)
			require.Equal(t, "resp_fake", res.RequestID)
			require.Equal(t, 2, res.OutputTokens)

			rq := srv.Requests()[0]
			require.Equal(t, "/v1beta/models/gemini-test:streamGenerateContent", rq.Path)
			require.Equal(t, "alt=sse", rq.Query, "the key must not be in the URL")
			require.Equal(t, key, rq.Header.Get("X-Goog-Api-Key"))
			require.Equal(t, map[string]any{"parts": []any{map[string]any{"text": "be brief"}}}, rq.Body["systemInstruction"])
			require.Equal(t, map[string]any{"maxOutputTokens": 42.0}, rq.Body["generationConfig"])
			contents := rq.Body["contents"].([]any)
			require.Len(t, contents, 3)
			require.Equal(t, "model", contents[1].(map[string]any)["role"])
			require.Equal(t, "user", contents[2].(map[string]any)["role"])
		})
	}
}

func TestFinishReasonOnEveryChunk(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	srv := llmtest.NewServer("gemini", nil, llmtest.Stream(llmtest.GeminiChunks("g", "STOP", true, true, "One. ", "Two. ", "Three."), llmtest.StreamOpts{}))
	defer srv.Close()
	var got strings.Builder
	_, err := newClient(t, srv).Stream(ctx, req, func(p string) { got.WriteString(p) })
	require.NoError(t, err)
	require.Equal(t, "One. Two. Three.", got.String(), "must read to EOF, not stop at the first finishReason")
}

func stream(t *testing.T, srv *llmtest.Server) llmtest.StreamFunc {
	return newClient(t, srv).Stream
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
		{"429 retry delay in body", llmtest.GeminiRateLimited("1.5s", "GenerateRequestsPerMinutePerProjectPerModel-FreeTier"), provider.KindRateLimit, "RESOURCE_EXHAUSTED", 1500 * time.Millisecond, "", ""},
		{"429 daily quota", llmtest.GeminiRateLimited("35s", "GenerateRequestsPerDayPerProjectPerModel-FreeTier"), provider.KindQuota, "RESOURCE_EXHAUSTED", 0, "", ""},
		{"503", llmtest.GeminiStatus(503, "UNAVAILABLE", "The model is overloaded."), provider.KindTransient, "UNAVAILABLE", 0, "", ""},
		{"500", llmtest.GeminiStatus(500, "INTERNAL", "An internal error has occurred."), provider.KindTransient, "INTERNAL", 0, "", ""},
		{"400 invalid key is auth", llmtest.GeminiInvalidKey(), provider.KindAuth, "INVALID_ARGUMENT", 0, "", ""},
		{"400", llmtest.GeminiStatus(400, "INVALID_ARGUMENT", "Invalid JSON payload"), provider.KindInvalidRequest, "INVALID_ARGUMENT", 0, "", ""},
		{"403", llmtest.GeminiStatus(403, "PERMISSION_DENIED", "denied"), provider.KindAuth, "PERMISSION_DENIED", 0, "", ""},
		{"403 status echoing the key", llmtest.GeminiStatus(403, "DENIED_"+key, "denied"), provider.KindAuth, "DENIED_[redacted]", 0, "", ""},
		{"404 model", llmtest.GeminiStatus(404, "NOT_FOUND", "models/gemini-nope is not found"), provider.KindModelNotFound, "NOT_FOUND", 0, "", ""},
		{"array-wrapped error", llmtest.Status(503, nil, "["+llmtest.GeminiError(503, "UNAVAILABLE", "busy")+"]"), provider.KindTransient, "UNAVAILABLE", 0, "", ""},
		{"safety finish, empty content", llmtest.Stream(llmtest.GeminiChunks("g", "SAFETY", true, false), llmtest.StreamOpts{}), provider.KindPolicy, "SAFETY", 0, "", ""},
		{"recitation", llmtest.Stream(llmtest.GeminiChunks("g", "RECITATION", true, false, "Once upon"), llmtest.StreamOpts{}), provider.KindPolicy, "RECITATION", 0, "Once upon", ""},
		{"prompt blocked", llmtest.Stream(llmtest.GeminiPromptBlocked(), llmtest.StreamOpts{}), provider.KindPolicy, "SAFETY", 0, "", ""},
		{"max tokens", llmtest.Stream(llmtest.GeminiChunks("g", "MAX_TOKENS", true, false, "To reset"), llmtest.StreamOpts{}), provider.KindUnknown, "", 0, "To reset", provider.FinishLength},
		{"mid-stream error", llmtest.Stream([]string{llmtest.GeminiChunks("g", "STOP", true, false, "Hi", "x")[0], llmtest.SSE("", llmtest.GeminiError(503, "UNAVAILABLE", "overloaded"), "\r\n")}, llmtest.StreamOpts{}), provider.KindTransient, "UNAVAILABLE", 0, "Hi", ""},
		// go-genai takes a stream line without the data: prefix that
		// parses as {"error":{...}} for the error (provider-wire-formats
		// 3.3): it was skipped as an unknown SSE field, and the stream
		// read as cut (a transient failure whatever the error said), or,
		// after a finishReason on every chunk, as a complete answer.
		{"mid-stream bare error line", llmtest.Stream([]string{llmtest.GeminiChunks("g", "STOP", true, false, "Hi", "x")[0], llmtest.GeminiError(429, "RESOURCE_EXHAUSTED", "quota", map[string]any{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "2s"}) + "\r\n\r\n"}, llmtest.StreamOpts{}), provider.KindRateLimit, "RESOURCE_EXHAUSTED", 2 * time.Second, "Hi", ""},
		{"bare error line after a finishReason", llmtest.Stream([]string{llmtest.GeminiChunks("g", "STOP", true, true, "Hi", "x")[0], llmtest.GeminiError(400, "INVALID_ARGUMENT", "bad") + "\n"}, llmtest.StreamOpts{}), provider.KindInvalidRequest, "INVALID_ARGUMENT", 0, "Hi", ""},
		{"malformed", llmtest.Stream([]string{"data: {\"candidates\": [\r\n\r\n"}, llmtest.StreamOpts{}), provider.KindMalformed, "", 0, "", ""},
		{"closed without finishReason", llmtest.Stream(llmtest.GeminiChunks("g", "STOP", true, false, "Hi", "there")[:1], llmtest.StreamOpts{}), provider.KindTransient, "", 0, "Hi", ""},
		{"dropped", llmtest.Drop(), provider.KindTransient, "", 0, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			llmtest.CheckFault(t, testTimeout, "gemini", key, stream, tt.reply, llmtest.Outcome{Kind: tt.kind, Code: tt.code, RetryAfter: tt.retryAfter, Text: tt.text, Finish: tt.finish})
		})
	}
}

func TestCancelMidStreamClosesUpstream(t *testing.T) {
	srv := llmtest.NewServer("gemini", nil, llmtest.Stream(llmtest.GeminiChunks("g", "STOP", true, false, "Hello", "world"), llmtest.StreamOpts{CutAfter: 1, Cut: llmtest.CutStall}))
	defer srv.Close()
	llmtest.CheckCancelClosesUpstream(t, testTimeout, srv, newClient(t, srv).Stream)
}

// TestUsage checks the tokens of usageMetadata: the prompt count from
// the first chunk on, the candidates (plus thoughts, billed as output)
// from the last.
func TestUsage(t *testing.T) {
	for _, tc := range []struct {
		name    string
		events  []string
		cut     int
		ok      bool
		in, out int
	}{
		{"last chunk", llmtest.GeminiChunksUsage("gemini-test", "STOP", true, false, llmtest.Usage{Input: 300, Output: 40}, "Go to ", "settings."), 0, true, 300, 40},
		{"thoughts count as output", llmtest.GeminiChunksUsage("gemini-test", "STOP", false, false, llmtest.Usage{Input: 300, Output: 40, Thoughts: 100}, "Go to ", "settings."), 0, true, 300, 140},
		{"cut before the last chunk", llmtest.GeminiChunksUsage("gemini-test", "STOP", true, false, llmtest.Usage{Input: 300, Output: 40}, "Go to ", "the ", "settings."), 2, false, 300, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
			defer cancel()
			o := llmtest.StreamOpts{}
			if tc.cut > 0 {
				o = llmtest.StreamOpts{CutAfter: tc.cut, Cut: llmtest.CutDrop}
			}
			srv := llmtest.NewServer("gemini", nil, llmtest.Stream(tc.events, o))
			defer srv.Close()
			res, err := newClient(t, srv).Stream(ctx, req, func(string) {})
			require.Equal(t, tc.ok, err == nil, "err = %v", err)
			require.Equal(t, tc.in, res.InputTokens)
			require.Equal(t, tc.out, res.OutputTokens)
		})
	}
}

// TestThinkingKeptToTheLeast: models that think by default are asked for
// the least thinking they allow, since their thoughts come out of the
// answer's few dozen output tokens and its first-token deadline (with
// thinking on, gemini-2.5-flash answers a short cap empty, MAX_TOKENS);
// models that do not think get no thinkingConfig, which they refuse.
func TestThinkingKeptToTheLeast(t *testing.T) {
	for _, tc := range []struct {
		model string
		want  any // generationConfig.thinkingConfig, nil for none
	}{
		{"gemini-2.5-flash", map[string]any{"thinkingBudget": 0.0}},
		{"gemini-2.5-flash-lite", map[string]any{"thinkingBudget": 0.0}},
		{"models/gemini-2.5-flash-preview-09-2025", map[string]any{"thinkingBudget": 0.0}},
		{"gemini-2.5-pro", map[string]any{"thinkingBudget": 128.0}},
		{"gemini-3-pro-preview", map[string]any{"thinkingLevel": "low"}},
		{"gemini-3-flash-preview", map[string]any{"thinkingLevel": "minimal"}},
		{"gemini-3.1-flash-lite", map[string]any{"thinkingLevel": "minimal"}},
		{"gemini-flash-latest", nil}, // an alias: which model it names changes
		{"gemini-2.0-flash", nil},
		{"gemini-test", nil},
	} {
		t.Run(tc.model, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
			defer cancel()
			srv := llmtest.NewServer("gemini", nil, llmtest.GeminiOK(tc.model, "Fine."))
			defer srv.Close()
			c := gemini.New(gemini.Config{BaseURL: srv.URL, Model: tc.model, APIKey: key, HTTPClient: llmtest.HTTPClient(t)})
			_, err := c.Stream(ctx, req, func(string) {})
			require.NoError(t, err)
			gc := srv.Requests()[0].Body["generationConfig"].(map[string]any)
			require.Equal(t, tc.want, gc["thinkingConfig"])
		})
	}
}

// TestDefaultModelThinksLeast: the default model is one that thinks.
func TestDefaultModelThinksLeast(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	srv := llmtest.NewServer("gemini", nil, llmtest.GeminiOK("gemini-2.5-flash", "Fine."))
	defer srv.Close()
	c := gemini.New(gemini.Config{BaseURL: srv.URL, APIKey: key, HTTPClient: llmtest.HTTPClient(t)})
	_, err := c.Stream(ctx, req, func(string) {})
	require.NoError(t, err)
	gc := srv.Requests()[0].Body["generationConfig"].(map[string]any)
	require.Equal(t, map[string]any{"thinkingBudget": 0.0}, gc["thinkingConfig"], "default model %s", c.Model())
}
