// Package llm is the LLM stage of voiced: a Chain of streaming providers
// (OpenAI-compatible, Anthropic, Gemini; see the subpackages) ending in
// the embedded extractive responder, run under the one deadline of the
// stage.
//
// Every attempt of every provider shares the deadline of Generate's
// context: an attempt gets min(provider cap, time left - reserve), is not
// started when the time left cannot cover the provider's learned time to
// first token plus a few tokens, and is abandoned when it sends no text
// within its time-to-first-token limit or stalls mid-stream. Failures are
// classified (provider.Kind) into retry-the-same-provider and
// fall-back-to-the-next decisions; retries wait for the server's
// requested delay or a jittered backoff only when that wait fits in the
// time left, and only while the retry budget (a token bucket, about 10%
// of requests) allows. Each provider and model has a circuit breaker
// (gobreaker v2) that ignores our own cancellations. Once the first piece
// of text has reached the client there is no retry and no fallback.
//
// Degradation reasons in pipeline.Generation:
//
//	provider_fallback    the answer came from a provider after the first (the first failed or was skipped)
//	extractive_fallback  no provider answered; the extractive responder did
//	stream_interrupted   the stream failed after text was sent; the answer is the text so far
//	truncated            the answer was cut by the output-token limit
//	policy_blocked       a provider blocked or refused after text was sent (with stream_interrupted)
//
// A safety or policy block before any text returns an error wrapping
// pipeline.ErrPolicyBlocked and nothing is emitted: the block is never
// retried or sent to another provider.
package llm
