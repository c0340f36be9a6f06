// Package provider declares what every LLM adapter of voiced implements:
// one small streaming interface, a provider-independent request, and one
// error type whose Kind decides whether the chain retries the same
// provider, falls back to the next one, or stops. The adapters (openai,
// anthropic, gemini) import this package; the chain in package llm uses
// it, so the adapters never depend on the chain.
package provider

import (
	"context"
	"time"
)

// Role is the author of one message of the conversation.
type Role string

// Roles of a provider-independent conversation.
const (
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
)

// Message is one message of the conversation, oldest first.
type Message struct {
	Role Role
	Text string
}

// Request is one generation request, the same for every provider.
type Request struct {
	// System is the system instruction (a top-level field for Anthropic
	// and Gemini, a "system" message for OpenAI).
	System string
	// Messages is the conversation: earlier turns, then the user's
	// current message (the transcript with intent and passages) last.
	Messages []Message
	// MaxOutputTokens caps the generated tokens; the chain derives it from
	// the time left. Always > 0.
	MaxOutputTokens int
}

// Finish reasons, normalised across providers.
const (
	FinishStop   = "stop"   // natural end or stop sequence
	FinishLength = "length" // cut off by MaxOutputTokens
	FinishOther  = "other"  // any other reason the provider gave
)

// Result is the final record of one streamed generation. Adapters fill
// what they learned even when Stream returns an error.
type Result struct {
	Provider  string
	Model     string // the model the provider says answered, else the configured one
	RequestID string
	// InputTokens and OutputTokens are the billed tokens as the
	// provider's own usage fields report them (OpenAI usage, Anthropic
	// message_start/message_delta usage, Gemini usageMetadata); 0 when the
	// stream ended before they came. OutputTokens includes reasoning or
	// thinking tokens, which are billed as output: OpenAI's
	// completion_tokens already counts them, Gemini's thoughtsTokenCount
	// is added to candidatesTokenCount.
	InputTokens  int
	OutputTokens int
	FinishReason string // one of the Finish* constants, "" when the stream had none
	Elapsed      time.Duration
}

// Provider is one LLM endpoint and model.
type Provider interface {
	// Name is the provider's name in logs and metrics ("openai", ...).
	Name() string
	// Model is the configured model.
	Model() string
	// Stream sends req and calls onText with each piece of text, in order,
	// from the calling goroutine, until the answer ends. It returns a nil
	// error only for a complete answer. Every other outcome is an *Error
	// whose Kind classifies it; cancellation of ctx is KindCanceled. Stream
	// performs exactly one HTTP request: retries belong to the caller.
	Stream(ctx context.Context, req *Request, onText func(piece string)) (Result, error)
}

// Warmer is implemented by providers that can open their connection
// ahead of the first request, so that request does not pay for DNS, TCP
// and TLS inside its time-to-first-token limit.
type Warmer interface {
	Warm(ctx context.Context) error
}
