package pipeline

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
)

// Transcriber starts streaming speech recognition for one utterance.
type Transcriber interface {
	// Start opens a recognizer for mono 16-bit PCM at sampleRate Hz. It may
	// wait for a free decoder, but no longer than ctx allows; when it cannot
	// get one in time it returns an error wrapping ErrOverloaded.
	Start(ctx context.Context, sampleRate int) (Recognizer, error)
}

// Recognizer is one utterance's streaming recognition. It is used by one
// goroutine at a time.
type Recognizer interface {
	// Write feeds the next samples, as they arrive, and returns the
	// current partial hypothesis ("" when there is none yet). It does not
	// keep pcm after it returns: the buffer is reused.
	Write(ctx context.Context, pcm []int16) (partial string, err error)
	// Finish ends the utterance and returns its final transcript.
	Finish(ctx context.Context) (string, error)
	// Close releases the recognizer. It is called exactly once, after
	// Finish or instead of it, and must not block for long.
	Close() error
}

// Degrader is implemented by a Recognizer whose transcript may come from
// less careful recognition than it is capable of (a busy engine's cheaper
// search). Degradation returns the reason for the result's degradation
// list (ReasonSTTBusy), or ""; it is called from the pipeline's goroutine,
// possibly while Write or Finish runs, so it must be safe for that and its
// answer fixed when Start returns.
type Degrader interface {
	Degradation() string
}

// Hurrier is implemented by a Recognizer that can put an utterance whose
// final frame has arrived ahead of streams still speaking. The pipeline
// calls Hurry, from its own goroutine, as soon as the final frame arrives,
// which may be while earlier frames still wait for Write.
type Hurrier interface {
	Hurry()
}

// Coverer is implemented by a Recognizer whose partial hypotheses are the
// words it heard, and which can tell how much of the audio written to it
// the newest one covers: Covered returns that, in samples at the rate the
// utterance started with. A recogniser refreshes its partial now and then
// and decodes in blocks, so the partial Write returns may cover less than
// was written. The feeder passes each partial with what it covers to a
// HeardSink; a recognizer without partials, or whose partials are not
// heard words (the simulator's), does not implement it.
type Coverer interface {
	Covered() int64
}

// HeardSink is implemented by a Sink that takes a Coverer's partial
// transcripts with the samples of the request's audio they cover (from
// its first sample), each one the recogniser returns, sent to the client
// or not. Heard must not block; it is called from the feeder's goroutine,
// never after the final transcript.
type HeardSink interface {
	Heard(text string, covered int64)
}

// Hypothesis is one of a recogniser's transcripts of an utterance with its
// score: the natural log of how likely the recogniser found it (acoustic
// likelihood times language model probability raised to its weight). Only
// differences between one utterance's scores mean anything.
type Hypothesis struct {
	Text  string
	Score float64
}

// Alternator is implemented by a Recognizer that can tell, after Finish
// returned a transcript, which transcripts it weighed: the N-best list,
// best first, the first being the transcript. Alternatives returns nil
// when it has none (Finish failed, no speech, or a search without them);
// it is called from the goroutine that called Finish.
type Alternator interface {
	Alternatives() []Hypothesis
}

// AlternativesClassifier is implemented by a Classifier that can find the
// intent of an utterance from its recogniser's alternatives (Alternator)
// rather than from the transcript alone. alts is best first and not
// empty.
type AlternativesClassifier interface {
	ClassifyAlternatives(ctx context.Context, alts []Hypothesis) (Intent, error)
}

// Intent is a classified intent with a confidence in [0, 1].
type Intent struct {
	Name       string
	Confidence float64
	// OffTopic is set with Name out_of_scope when the classifier found the
	// text off the domain's topic, or could not tell it from an in-scope
	// intent: the answer then says what the assistant can help with and
	// quotes no passage. It is unset when out_of_scope only means that no
	// in-scope intent was probable enough, where a question no intent
	// covers ("do gift cards expire") may still be answered from the
	// knowledge base.
	OffTopic bool
}

// Classifier finds the intent of a transcript.
type Classifier interface {
	Classify(ctx context.Context, text string) (Intent, error)
}

// Passage is a retrieved piece of the knowledge base.
type Passage struct {
	ID    string // article id (with a passage suffix where useful)
	Title string
	Text  string
	Score float64 // higher is better
}

// Retriever finds the passages most relevant to a query.
type Retriever interface {
	Retrieve(ctx context.Context, query string, k int) ([]Passage, error)
}

// Turn is one earlier exchange of the session, oldest first in a history.
type Turn struct {
	User      string
	Assistant string
}

// GenerateRequest is what the answer generator gets. Passages is empty
// when retrieval was skipped or failed; Intent.Name is empty when the
// intent is unknown.
type GenerateRequest struct {
	Transcript string
	Intent     Intent
	Passages   []Passage
	History    []Turn
	// Synthesis, when the answer is also spoken, is the synthesiser's
	// expected time for a number of characters (learned online), so that
	// the generator can size the answer for the audio to fit the budget
	// too. Nil when speech is off.
	Synthesis func(chars int) time.Duration
	// ConversationID names the conversation the request belongs to, for
	// per-conversation accounting such as the LLM's cost cap; empty when
	// unknown.
	ConversationID string
	// Tenant names the client the request is answered for (the identity
	// of its access token), for per-tenant accounting such as the LLM's
	// cost cap per tenant; empty when the server has none.
	Tenant string
	// Started, when set, is called by the generator before the first
	// piece it emits, from the goroutine that emits, with what the answer
	// comes from: provider, model and sources. An answer cut at its
	// deadline keeps them, although Generate's own return comes too late
	// to be used.
	Started func(Generation)
}

// Generation describes how an answer was produced.
type Generation struct {
	Provider string // e.g. "openai", "extractive"
	Model    string
	// Degradation lists reasons the answer is degraded, e.g. a fallback
	// to another provider or a stream cut short.
	Degradation []string
	// Sources are the passages the answer was built from, in the order
	// used: none for greetings, goodbyes, out-of-scope and templated
	// answers.
	Sources []Passage
}

// Generator streams an answer. The deadline of ctx is the one deadline of
// the whole generation, whatever providers or retries it uses.
type Generator interface {
	// Generate calls emit with each piece of the answer in order, from the
	// calling goroutine or one it waits for, and returns once the answer
	// is complete. After it returns it must not call emit again.
	Generate(ctx context.Context, req GenerateRequest, emit func(piece string)) (Generation, error)
}

// Templater produces the templated answer used when no generated answer
// can be had in time. intent.Name is empty when the intent is unknown.
type Templater interface {
	Template(intent Intent, transcript string) string
}

// NoWords reports whether a transcript has no words: no letter and no
// digit. Silence, and the punctuation some recognisers return for it
// ("." or "…"), have nothing to understand or answer.
func NoWords(transcript string) bool {
	return !strings.ContainsFunc(transcript, func(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) })
}

// Errors a stage wraps (fmt.Errorf("...: %w", ErrX)) to say what kind of
// failure it had; the pipeline maps them to protocol error codes.
var (
	ErrOverloaded    = errors.New("overloaded")
	ErrUnavailable   = errors.New("unavailable")
	ErrRateLimited   = errors.New("rate limited")
	ErrPolicyBlocked = errors.New("blocked by policy")
	ErrBadAudio      = errors.New("bad audio")

	// ErrNoRecognizer is the overload of a Transcriber with no recognizer
	// free in time (all decoders busy); it wraps ErrOverloaded.
	ErrNoRecognizer = fmt.Errorf("no speech recognizer free: %w", ErrOverloaded)
)
