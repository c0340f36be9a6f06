package llmtest

// OpenAIChunks returns a Chat Completions stream of pieces ending with
// finishReason ("stop", "length", "content_filter"), a usage chunk of 8
// prompt tokens and one completion token a piece, and "data: [DONE]", as
// api.openai.com sends it.
func OpenAIChunks(model, finishReason string, pieces ...string) []string {
	return OpenAIChunksUsage(model, finishReason, Usage{Input: 8, Output: len(pieces)}, pieces...)
}

// Usage is the token usage a fake reports in its provider's own fields.
type Usage struct {
	Input, Output int
	// Thoughts (Gemini only) is thoughtsTokenCount, billed as output.
	Thoughts int
}

// OpenAIChunksUsage is OpenAIChunks with the given usage, sent as
// stream_options.include_usage makes OpenAI send it: every chunk has
// "usage": null, and one more chunk with "choices": [] and the totals
// comes before "data: [DONE]".
func OpenAIChunksUsage(model, finishReason string, u Usage, pieces ...string) []string {
	chunk := func(delta map[string]any, finish any) string {
		return SSE("", JSON(map[string]any{
			"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 1727889370, "model": model,
			"system_fingerprint": "fp_fake",
			"choices":            []any{map[string]any{"index": 0, "delta": delta, "logprobs": nil, "finish_reason": finish}},
			"usage":              nil,
		}), "\n")
	}
	evs := []string{chunk(map[string]any{"role": "assistant", "content": "", "refusal": nil}, nil)}
	for _, p := range pieces {
		evs = append(evs, chunk(map[string]any{"content": p}, nil))
	}
	evs = append(evs, chunk(map[string]any{}, finishReason))
	evs = append(evs, SSE("", JSON(map[string]any{
		"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 1727889370, "model": model,
		"choices": []any{}, "usage": map[string]any{"prompt_tokens": u.Input, "completion_tokens": u.Output, "total_tokens": u.Input + u.Output,
			"prompt_tokens_details":     map[string]any{"cached_tokens": 0, "audio_tokens": 0},
			"completion_tokens_details": map[string]any{"reasoning_tokens": 0, "audio_tokens": 0, "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0}},
	}), "\n"))
	return append(evs, "data: [DONE]\n\n")
}

// OpenAIRefusal is a stream whose delta carries a refusal.
func OpenAIRefusal(model string) []string {
	return []string{SSE("", JSON(map[string]any{
		"id": "chatcmpl-fake", "object": "chat.completion.chunk", "model": model,
		"choices": []any{map[string]any{"index": 0, "delta": map[string]any{"refusal": "I can't help with that."}, "finish_reason": nil}},
	}), "\n")}
}

// OpenAIError is an error body {"error":{...}}; code is a string, an int
// (vLLM, llama.cpp) or nil.
func OpenAIError(message, typ string, code any) string {
	return JSON(map[string]any{"error": map[string]any{"message": message, "type": typ, "param": nil, "code": code}})
}

// OpenAIMidStreamError is a data event with a top-level error.
func OpenAIMidStreamError(message, typ string) string {
	return SSE("", OpenAIError(message, typ, nil), "\n")
}

// OpenAIOK answers with the pieces and a stop.
func OpenAIOK(model string, pieces ...string) Reply {
	return Stream(OpenAIChunks(model, "stop", pieces...), StreamOpts{Header: map[string]string{"X-Request-Id": "req_fake"}})
}

// OpenAIStatus answers with an error status and body.
func OpenAIStatus(code int, header map[string]string, message, typ string, errCode any) Reply {
	return Status(code, header, OpenAIError(message, typ, errCode))
}
