package llmtest

// AnthropicEvents returns a Messages stream of pieces ending with
// stopReason ("end_turn", "max_tokens", "refusal"), with a ping in
// between, as the API sends it.
func AnthropicEvents(model, stopReason string, pieces ...string) []string {
	return AnthropicEventsUsage(model, stopReason, Usage{Input: 25, Output: len(pieces) + 1}, pieces...)
}

// AnthropicEventsUsage is AnthropicEvents with the given usage, where the
// API reports it: message_start carries input_tokens and an output_tokens
// of 1, and message_delta the cumulative output_tokens.
func AnthropicEventsUsage(model, stopReason string, u Usage, pieces ...string) []string {
	evs := []string{
		SSE("message_start", JSON(map[string]any{"type": "message_start", "message": map[string]any{
			"id": "msg_fake", "type": "message", "role": "assistant", "content": []any{}, "model": model,
			"stop_reason": nil, "stop_sequence": nil, "usage": map[string]any{"input_tokens": u.Input, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0, "output_tokens": 1}}}), "\n"),
		SSE("content_block_start", JSON(map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "text", "text": ""}}), "\n"),
		SSE("ping", `{"type": "ping"}`, "\n"),
	}
	for _, p := range pieces {
		evs = append(evs, SSE("content_block_delta", JSON(map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "text_delta", "text": p}}), "\n"))
	}
	return append(evs,
		SSE("content_block_stop", `{"type":"content_block_stop","index":0}`, "\n"),
		SSE("message_delta", JSON(map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stopReason, "stop_sequence": nil}, "usage": map[string]any{"output_tokens": u.Output}}), "\n"),
		SSE("message_stop", `{"type":"message_stop"}`, "\n"),
	)
}

// AnthropicError is an error body.
func AnthropicError(typ, message string) string {
	return JSON(map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": message}, "request_id": "req_fake"})
}

// AnthropicErrorEvent is an error event sent mid-stream after a 200.
func AnthropicErrorEvent(typ, message string) string {
	return SSE("error", JSON(map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": message}}), "\n")
}

// AnthropicOK answers with the pieces and end_turn.
func AnthropicOK(model string, pieces ...string) Reply {
	return Stream(AnthropicEvents(model, "end_turn", pieces...), StreamOpts{Header: map[string]string{"Request-Id": "req_fake"}})
}

// AnthropicStatus answers with an error status and body.
func AnthropicStatus(code int, header map[string]string, typ, message string) Reply {
	return Status(code, header, AnthropicError(typ, message))
}
