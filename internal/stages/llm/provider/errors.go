package provider

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Kind classifies a failed attempt. Each kind carries two decisions:
// retry the same provider, and fall back to the next one.
type Kind int

// Kinds of failure. See Kind.Retry and Kind.Fallback.
const (
	KindUnknown Kind = iota
	// KindTransient: connection errors, 408, 409, 5xx, 529 overloaded, a
	// stream cut before its end marker.
	KindTransient
	// KindRateLimit: 429 with a wait the server may give (RetryAfter).
	KindRateLimit
	// KindQuota: out of credit or a daily quota; waiting will not help.
	KindQuota
	// KindModelNotFound: the configured model does not exist here.
	KindModelNotFound
	// KindAuth: 401, 403, Gemini's invalid-key 400. A broken key.
	KindAuth
	// KindInvalidRequest: 400, 404, 422: the request itself is wrong; and
	// a redirect to another host (3xx, not followed): the base URL is.
	KindInvalidRequest
	// KindPolicy: safety or policy block, refusal, recitation.
	KindPolicy
	// KindCanceled: our own cancellation or deadline. Not the provider's
	// fault: it never counts against the provider's health.
	KindCanceled
	// KindTimeout: the provider accepted the request but sent no text
	// within the time-to-first-token limit, or stalled mid-stream.
	KindTimeout
	// KindMalformed: a response voiced cannot parse.
	KindMalformed
	// KindEmpty: a response that ended without any usable text.
	KindEmpty
)

var kindNames = [...]string{
	KindUnknown:        "unknown",
	KindTransient:      "transient",
	KindRateLimit:      "rate_limit",
	KindQuota:          "quota",
	KindModelNotFound:  "model_not_found",
	KindAuth:           "auth",
	KindInvalidRequest: "invalid_request",
	KindPolicy:         "policy",
	KindCanceled:       "canceled",
	KindTimeout:        "timeout",
	KindMalformed:      "malformed",
	KindEmpty:          "empty",
}

// String is the kind's label in logs and metrics.
func (k Kind) String() string {
	if k >= 0 && int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// Retry reports whether the same provider is worth another attempt.
func (k Kind) Retry() bool {
	return k == KindTransient || k == KindRateLimit || k == KindUnknown
}

// Fallback reports whether the next provider should be tried.
// authFallback is the configured choice for KindAuth (default false, so
// a broken key is not hidden behind another provider's answers).
func (k Kind) Fallback(authFallback bool) bool {
	switch k {
	case KindAuth:
		return authFallback
	case KindInvalidRequest, KindPolicy, KindCanceled:
		return false
	}
	return true
}

// Health reports whether the outcome counts for the provider's circuit
// breaker. Our own cancellations do not; neither do invalid requests and
// policy blocks, which say something about the request, not the provider.
func (k Kind) Health() bool {
	switch k {
	case KindCanceled, KindInvalidRequest, KindPolicy:
		return false
	}
	return true
}

// Error is a classified provider failure. Its text never contains the
// API key: adapters redact provider messages before storing them.
type Error struct {
	Kind     Kind
	Provider string
	Model    string
	Status   int    // HTTP status, 0 when none (connection error, mid-stream)
	Code     string // the provider's error type or code, e.g. "insufficient_quota"
	Message  string // the provider's message, redacted and shortened
	// RetryAfter is the wait the server asked for (retry-after-ms,
	// retry-after, Gemini's RetryInfo.retryDelay), 0 when none.
	RetryAfter time.Duration
	RequestID  string
	Err        error // cause, e.g. a net error or context.Canceled
}

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s: %s", e.Provider, e.Model, e.Kind)
	if e.Status != 0 {
		fmt.Fprintf(&b, " (HTTP %d)", e.Status)
	}
	if e.Code != "" {
		fmt.Fprintf(&b, " %s", e.Code)
	}
	if e.Message != "" {
		fmt.Fprintf(&b, ": %s", e.Message)
	}
	if e.Err != nil {
		fmt.Fprintf(&b, ": %v", e.Err)
	}
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// KindOf returns the kind of err: the Kind of an *Error in its chain,
// KindCanceled for context errors, else KindUnknown.
func KindOf(err error) Kind {
	if e, ok := errors.AsType[*Error](err); ok {
		return e.Kind
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return KindCanceled
	}
	return KindUnknown
}

// KindForStatus is the default classification of an HTTP error status;
// adapters refine it with the provider's error type or code.
func KindForStatus(status int) Kind {
	switch {
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return KindAuth
	case status == http.StatusTooManyRequests:
		return KindRateLimit
	case status == http.StatusPaymentRequired:
		return KindQuota
	case status == http.StatusRequestTimeout || status == http.StatusConflict || status >= 500:
		return KindTransient
	case status >= 400:
		return KindInvalidRequest
	case status >= 300:
		// A redirect to another host, not followed (see Post): the base
		// URL is wrong.
		return KindInvalidRequest
	}
	return KindUnknown
}

// RetryAfter reads the server's requested wait from the headers:
// retry-after-ms first, then retry-after in seconds or as an HTTP date.
// It returns 0 when there is none or it cannot be parsed, and at most
// MaxRetryAfter.
func RetryAfter(h http.Header, now time.Time) time.Duration {
	if v := h.Get("Retry-After-Ms"); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms > 0 {
			return wait(ms, time.Millisecond)
		}
	}
	v := h.Get("Retry-After")
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		return wait(s, time.Second)
	}
	if t, err := http.ParseTime(v); err == nil {
		return min(max(t.Sub(now), 0), MaxRetryAfter)
	}
	return 0
}

// MaxRetryAfter bounds the wait a server may ask for: a larger one (or
// one too large for a Duration, which would overflow into a negative
// wait and start no cooldown) is taken as this long.
const MaxRetryAfter = 24 * time.Hour

// wait is n units as a wait: 0 unless positive (NaN included), at most
// MaxRetryAfter.
func wait(n float64, unit time.Duration) time.Duration {
	if !(n > 0) {
		return 0
	}
	return time.Duration(min(n, float64(MaxRetryAfter/unit)) * float64(unit))
}

// Redact removes every secret from s and shortens it to at most 300
// bytes, so provider messages (which sometimes echo part of a key) are
// safe to put into errors and logs.
func Redact(s string, secrets ...string) string {
	for _, k := range secrets {
		if len(k) >= 4 {
			s = strings.ReplaceAll(s, k, "[redacted]")
		}
	}
	return cut(s, 300)
}

// cut bounds s to limit bytes and marks the cut, at a character's start:
// half a character is invalid UTF-8 (ToValidUTF8 drops it).
func cut(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	return strings.ToValidUTF8(s[:limit], "") + "..."
}

// RedactCode is Redact for a provider's error type or code: a short
// token, so at most 64 bytes. A provider that echoes part of a request
// (a key, a header) may do it here too.
func RedactCode(s string, secrets ...string) string {
	return cut(Redact(s, secrets...), 64)
}

// ContextError classifies an error seen while ctx may be done: when ctx
// (our own request) is done, the failure is ours (KindCanceled), whatever
// the transport reported.
// The chain cancels an attempt with a cause wrapping ErrNoProgress when
// the provider sends nothing in time; that is KindTimeout, the provider's
// fault.
func ContextError(ctx context.Context, err error) (Kind, error) {
	if ctx.Err() != nil {
		cause := context.Cause(ctx)
		if errors.Is(cause, ErrNoProgress) {
			return KindTimeout, cause
		}
		return KindCanceled, cause
	}
	return KindTransient, err
}

// ErrNoProgress is the cancellation cause the chain gives an attempt
// whose provider sent no text within the time-to-first-token or stall
// limit.
var ErrNoProgress = errors.New("no text from the provider in time")
