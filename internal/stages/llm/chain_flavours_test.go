package llm

import (
	"testing"
	"time"

	"github.com/voiced/voiced/internal/pipeline"
	"github.com/voiced/voiced/internal/stages/llm/llmtest"
)

// TestFaultTableAnthropicGemini runs the faults specific to the Anthropic
// and Gemini wire formats through the real adapters and the real chain
// (order anthropic, gemini, then the OpenAI-compatible backup).
func TestFaultTableAnthropicGemini(t *testing.T) {
	const budget = 2500 * time.Millisecond
	antOK := llmtest.AnthropicOK("anthropic-model", "Anthropic says: ", "open Settings.")
	gemOK := llmtest.GeminiOK("gemini-model", "Gemini says: ", "open Settings.")
	tests := []struct {
		name         string
		anthropic    []llmtest.Reply
		gemini       []llmtest.Reply
		backup       []llmtest.Reply // default: answers ok
		wantAttempts []string
		wantText     string
		wantProvider string
		wantDegr     []string
		wantErr      error
		minGap       time.Duration
	}{
		{name: "anthropic 529 then ok", anthropic: []llmtest.Reply{llmtest.AnthropicStatus(529, nil, "overloaded_error", "Overloaded"), antOK}, gemini: []llmtest.Reply{gemOK},
			wantAttempts: []string{"anthropic", "anthropic"}, wantText: "Anthropic says: open Settings.", wantProvider: "anthropic"},
		{name: "anthropic 429 retry-after then ok", anthropic: []llmtest.Reply{llmtest.AnthropicStatus(429, map[string]string{"retry-after": "1"}, "rate_limit_error", "rate limited"), antOK}, gemini: []llmtest.Reply{gemOK},
			wantAttempts: []string{"anthropic", "anthropic"}, wantText: "Anthropic says: open Settings.", wantProvider: "anthropic", minGap: time.Second},
		{name: "anthropic error event after 200 with text", anthropic: []llmtest.Reply{llmtest.Stream(append(llmtest.AnthropicEvents("anthropic-model", "end_turn", "Anthropic says: ")[:4], llmtest.AnthropicErrorEvent("overloaded_error", "Overloaded")), llmtest.StreamOpts{})}, gemini: []llmtest.Reply{gemOK},
			wantAttempts: []string{"anthropic"}, wantText: "Anthropic says: ", wantProvider: "anthropic", wantDegr: []string{ReasonStreamInterrupted}},
		{name: "anthropic error event before text: retry", anthropic: []llmtest.Reply{llmtest.Stream(append(llmtest.AnthropicEvents("anthropic-model", "end_turn")[:3], llmtest.AnthropicErrorEvent("overloaded_error", "Overloaded")), llmtest.StreamOpts{}), antOK}, gemini: []llmtest.Reply{gemOK},
			wantAttempts: []string{"anthropic", "anthropic"}, wantText: "Anthropic says: open Settings.", wantProvider: "anthropic"},
		{name: "anthropic refusal", anthropic: []llmtest.Reply{llmtest.Stream(llmtest.AnthropicEvents("anthropic-model", "refusal"), llmtest.StreamOpts{})}, gemini: []llmtest.Reply{gemOK},
			wantAttempts: []string{"anthropic"}, wantProvider: "anthropic", wantErr: pipeline.ErrPolicyBlocked},
		{name: "anthropic 401 stops at extractive", anthropic: []llmtest.Reply{llmtest.AnthropicStatus(401, nil, "authentication_error", "invalid x-api-key")}, gemini: []llmtest.Reply{gemOK},
			wantAttempts: []string{"anthropic"}, wantText: extractiveText, wantProvider: "extractive", wantDegr: []string{ReasonExtractiveFallback}},
		{name: "anthropic 400 credit balance falls back to gemini", anthropic: []llmtest.Reply{llmtest.AnthropicStatus(400, nil, "invalid_request_error", "Your credit balance is too low")}, gemini: []llmtest.Reply{gemOK},
			wantAttempts: []string{"anthropic", "gemini"}, wantText: "Gemini says: open Settings.", wantProvider: "gemini", wantDegr: []string{ReasonProviderFallback}},
		{name: "gemini 429 retry delay in body", anthropic: []llmtest.Reply{llmtest.AnthropicStatus(404, nil, "not_found_error", "model: anthropic-model")}, gemini: []llmtest.Reply{llmtest.GeminiRateLimited("0.3s", "GenerateRequestsPerMinutePerProjectPerModel-FreeTier"), gemOK},
			wantAttempts: []string{"anthropic", "gemini", "gemini"}, wantText: "Gemini says: open Settings.", wantProvider: "gemini", wantDegr: []string{ReasonProviderFallback}},
		{name: "gemini invalid key 400 is auth", anthropic: []llmtest.Reply{llmtest.AnthropicStatus(529, nil, "overloaded_error", "Overloaded")}, gemini: []llmtest.Reply{llmtest.GeminiInvalidKey()},
			wantAttempts: []string{"anthropic", "anthropic", "gemini"}, wantText: extractiveText, wantProvider: "extractive", wantDegr: []string{ReasonExtractiveFallback}},
		{name: "gemini safety block", anthropic: []llmtest.Reply{llmtest.AnthropicStatus(503, nil, "api_error", "down")}, gemini: []llmtest.Reply{llmtest.Stream(llmtest.GeminiChunks("gemini-model", "SAFETY", true, false), llmtest.StreamOpts{})},
			wantAttempts: []string{"anthropic", "anthropic", "gemini"}, wantProvider: "gemini", wantErr: pipeline.ErrPolicyBlocked},
		{name: "gemini cut without finish reason", anthropic: []llmtest.Reply{llmtest.AnthropicStatus(503, nil, "api_error", "down")}, gemini: []llmtest.Reply{llmtest.Stream(llmtest.GeminiChunks("gemini-model", "STOP", true, false, "Gemini says: ", "x")[:1], llmtest.StreamOpts{})},
			wantAttempts: []string{"anthropic", "anthropic", "gemini"}, wantText: "Gemini says: ", wantProvider: "gemini", wantDegr: []string{ReasonProviderFallback, ReasonStreamInterrupted}},
		{name: "everything fails: extractive", anthropic: []llmtest.Reply{llmtest.Drop()}, gemini: []llmtest.Reply{llmtest.GeminiStatus(500, "INTERNAL", "boom")}, backup: []llmtest.Reply{llmtest.OpenAIStatus(503, nil, "busy", "server_error", nil)},
			wantAttempts: []string{"anthropic", "anthropic", "gemini", "gemini", "backup", "backup"}, wantText: extractiveText, wantProvider: "extractive", wantDegr: []string{ReasonExtractiveFallback}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			backup := tt.backup
			if backup == nil {
				backup = []llmtest.Reply{ok("backup")}
			}
			f := newFixture(t, testConfig(), link{"anthropic", tt.anthropic}, link{"gemini", tt.gemini}, link{"backup", backup})
			f.check(t, f.generate(t, budget), want{attempts: tt.wantAttempts, text: tt.wantText, provider: tt.wantProvider, degr: tt.wantDegr, err: tt.wantErr, minGap: tt.minGap})
		})
	}
}
