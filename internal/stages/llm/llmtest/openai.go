package llmtest

// OpenAIChunks returns a Chat Completions stream of pieces ending with
// finishReason ("stop", "length", "content_filter"), a usage chunk and
// "data: [DONE]", as api.openai.com sends it.
func OpenAIChunks(model, finishReason string, pieces ...string) []string {
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
		"choices": []any{}, "usage": map[string]any{"prompt_tokens": 8, "completion_tokens": len(pieces), "total_tokens": 8 + len(pieces)},
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
