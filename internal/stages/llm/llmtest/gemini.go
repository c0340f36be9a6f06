package llmtest

// GeminiChunks returns an alt=sse stream of pieces, CRLF-framed when crlf,
// with finishReason and usageMetadata on the last chunk and no end
// marker, as the Gemini API sends it. everyChunk puts finishReason on
// every chunk, as older models did.
func GeminiChunks(model, finishReason string, crlf, everyChunk bool, pieces ...string) []string {
	return GeminiChunksUsage(model, finishReason, crlf, everyChunk, Usage{Input: 5, Output: len(pieces)}, pieces...)
}

// GeminiChunksUsage is GeminiChunks with the given usage: every chunk
// carries usageMetadata with the promptTokenCount, and the last one the
// candidatesTokenCount (and thoughtsTokenCount when u.Thoughts > 0) and
// their totalTokenCount.
func GeminiChunksUsage(model, finishReason string, crlf, everyChunk bool, u Usage, pieces ...string) []string {
	eol := "\n"
	if crlf {
		eol = "\r\n"
	}
	var evs []string
	for i, p := range pieces {
		cand := map[string]any{"content": map[string]any{"parts": []any{map[string]any{"text": p}}, "role": "model"}, "index": 0}
		usage := map[string]any{"promptTokenCount": u.Input, "totalTokenCount": u.Input}
		if i == len(pieces)-1 || everyChunk {
			cand["finishReason"] = finishReason
		}
		if i == len(pieces)-1 {
			usage = map[string]any{"promptTokenCount": u.Input, "candidatesTokenCount": u.Output, "totalTokenCount": u.Input + u.Output + u.Thoughts}
			if u.Thoughts > 0 {
				usage["thoughtsTokenCount"] = u.Thoughts
			}
		}
		evs = append(evs, SSE("", JSON(map[string]any{"candidates": []any{cand}, "usageMetadata": usage, "modelVersion": model, "responseId": "resp_fake"}), eol))
	}
	if len(pieces) == 0 {
		cand := map[string]any{"content": map[string]any{"parts": []any{}, "role": "model"}, "finishReason": finishReason, "index": 0}
		evs = append(evs, SSE("", JSON(map[string]any{"candidates": []any{cand}, "modelVersion": model, "responseId": "resp_fake"}), eol))
	}
	return evs
}

// GeminiPromptBlocked is a stream whose only chunk blocks the prompt.
func GeminiPromptBlocked() []string {
	return []string{SSE("", `{"promptFeedback":{"blockReason":"SAFETY","safetyRatings":[{"category":"HARM_CATEGORY_HARASSMENT","probability":"HIGH"}]},"usageMetadata":{"promptTokenCount":9,"totalTokenCount":9}}`, "\r\n")}
}

// GeminiError is a Google RPC status error body; details may be nil.
func GeminiError(code int, status, message string, details ...any) string {
	e := map[string]any{"code": code, "message": message, "status": status}
	if len(details) > 0 {
		e["details"] = details
	}
	return JSON(map[string]any{"error": e})
}

// GeminiInvalidKey is the 400 the API sends for a bad key.
func GeminiInvalidKey() Reply {
	return Status(400, nil, GeminiError(400, "INVALID_ARGUMENT", "API key not valid. Please pass a valid API key.",
		map[string]any{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID", "domain": "googleapis.com"}))
}

// GeminiRateLimited is a 429 with the wait in RetryInfo and no Retry-After.
func GeminiRateLimited(retryDelay, quotaID string) Reply {
	return Status(429, nil, GeminiError(429, "RESOURCE_EXHAUSTED", "You exceeded your current quota. Please retry in "+retryDelay+".",
		map[string]any{"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": []any{map[string]any{"quotaMetric": "generativelanguage.googleapis.com/generate_content_free_tier_requests", "quotaId": quotaID}}},
		map[string]any{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": retryDelay}))
}

// GeminiOK answers with the pieces, CRLF-framed.
func GeminiOK(model string, pieces ...string) Reply {
	return Stream(GeminiChunks(model, "STOP", true, false, pieces...), StreamOpts{})
}

// GeminiStatus answers with an error status and RPC status body.
func GeminiStatus(code int, status, message string) Reply {
	return Status(code, nil, GeminiError(code, status, message))
}
