package provider

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/stages/llm/sse"
)

func TestKindDecisions(t *testing.T) {
	tests := []struct {
		kind                     Kind
		retry, fallback, health  bool
		fallbackWithAuthFallback bool
	}{
		{KindTransient, true, true, true, true},
		{KindRateLimit, true, true, true, true},
		{KindQuota, false, true, true, true},
		{KindModelNotFound, false, true, true, true},
		{KindAuth, false, false, true, true},
		{KindInvalidRequest, false, false, false, false},
		{KindPolicy, false, false, false, false},
		{KindCanceled, false, false, false, false},
		{KindTimeout, false, true, true, true},
		{KindMalformed, false, true, true, true},
		{KindEmpty, false, true, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.kind.String(), func(t *testing.T) {
			require.Equal(t, tt.retry, tt.kind.Retry(), "retry")
			require.Equal(t, tt.fallback, tt.kind.Fallback(false), "fallback")
			require.Equal(t, tt.fallbackWithAuthFallback, tt.kind.Fallback(true), "fallback with auth fallback")
			require.Equal(t, tt.health, tt.kind.Health(), "health")
		})
	}
}

func TestKindForStatus(t *testing.T) {
	want := map[int]Kind{400: KindInvalidRequest, 401: KindAuth, 402: KindQuota, 403: KindAuth, 404: KindInvalidRequest, 408: KindTransient,
		409: KindTransient, 413: KindInvalidRequest, 422: KindInvalidRequest, 429: KindRateLimit, 500: KindTransient, 503: KindTransient, 504: KindTransient, 529: KindTransient}
	for status, k := range want {
		require.Equal(t, k, KindForStatus(status), "status %d", status)
	}
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 30, 7, 0, 0, 0, time.UTC)
	tests := []struct {
		name   string
		header map[string]string
		want   time.Duration
	}{
		{"none", nil, 0},
		{"ms wins", map[string]string{"Retry-After-Ms": "250", "Retry-After": "3"}, 250 * time.Millisecond},
		{"seconds", map[string]string{"Retry-After": "3"}, 3 * time.Second},
		{"fractional seconds", map[string]string{"Retry-After": "0.5"}, 500 * time.Millisecond},
		{"http date", map[string]string{"Retry-After": now.Add(4 * time.Second).Format(http.TimeFormat)}, 4 * time.Second},
		{"date in the past", map[string]string{"Retry-After": now.Add(-time.Minute).Format(http.TimeFormat)}, 0},
		{"garbage", map[string]string{"Retry-After": "soon"}, 0},
		{"negative", map[string]string{"Retry-After": "-1"}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			for k, v := range tt.header {
				h.Set(k, v)
			}
			require.Equal(t, tt.want, RetryAfter(h, now))
		})
	}
}

func TestRedact(t *testing.T) {
	require.Equal(t, "Incorrect API key provided: [redacted].", Redact("Incorrect API key provided: sk-abc123.", "sk-abc123", ""))
	require.Len(t, Redact(string(make([]byte, 1000))), 303)
}

func TestKindOfAndContextError(t *testing.T) {
	e := &Error{Kind: KindQuota, Provider: "p", Model: "m"}
	require.Equal(t, KindQuota, KindOf(fmt.Errorf("wrapped: %w", e)))
	require.Equal(t, KindCanceled, KindOf(context.Canceled))
	require.Equal(t, KindUnknown, KindOf(errors.New("x")))

	ctx, cancel := context.WithCancelCause(context.Background())
	k, _ := ContextError(ctx, errors.New("read: connection reset"))
	require.Equal(t, KindTransient, k, "ctx alive: the connection failed")
	cancel(fmt.Errorf("%w: first token", ErrNoProgress))
	k, cause := ContextError(ctx, errors.New("context canceled"))
	require.Equal(t, KindTimeout, k, "cancelled by the TTFT limit: the provider's fault")
	require.ErrorIs(t, cause, ErrNoProgress)
	ctx2, cancel2 := context.WithCancel(context.Background())
	cancel2()
	k, _ = ContextError(ctx2, errors.New("x"))
	require.Equal(t, KindCanceled, k)
}

func TestReadError(t *testing.T) {
	live := context.Background()
	done, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name  string
		ctx   context.Context
		err   error
		kind  Kind
		cause error
	}{
		{"line too long", live, sse.ErrLineTooLong, KindMalformed, sse.ErrLineTooLong},
		{"clean close is a cut", live, io.EOF, KindTransient, io.ErrUnexpectedEOF},
		{"reset", live, io.ErrUnexpectedEOF, KindTransient, io.ErrUnexpectedEOF},
		{"ours when ctx is done", done, io.EOF, KindCanceled, context.Canceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pe := ReadError(tt.ctx, "p", "m", "req_1", tt.err)
			require.Equal(t, tt.kind, pe.Kind)
			require.ErrorIs(t, pe, tt.cause)
			require.Equal(t, "req_1", pe.RequestID)
			require.Equal(t, "p", pe.Provider)
		})
	}
}

func TestBaseURLForms(t *testing.T) {
	for _, tc := range []struct {
		name, base, want string
		f                func(string, string) string
		version          string
	}{
		{"anthropic SDK form", "https://api.anthropic.com", "https://api.anthropic.com/v1", VersionedBase, "v1"},
		{"anthropic SDK form, slash", "https://api.anthropic.com/", "https://api.anthropic.com/v1", VersionedBase, "v1"},
		{"anthropic with v1", "https://api.anthropic.com/v1", "https://api.anthropic.com/v1", VersionedBase, "v1"},
		{"anthropic with v1/", "https://api.anthropic.com/v1/", "https://api.anthropic.com/v1", VersionedBase, "v1"},
		{"anthropic behind a proxy path", "http://127.0.0.1:9/anthropic", "http://127.0.0.1:9/anthropic/v1", VersionedBase, "v1"},
		{"gemini SDK form", "https://generativelanguage.googleapis.com", "https://generativelanguage.googleapis.com/v1beta", VersionedBase, "v1beta"},
		{"gemini with v1beta", "https://generativelanguage.googleapis.com/v1beta", "https://generativelanguage.googleapis.com/v1beta", VersionedBase, "v1beta"},
		{"gemini with v1", "https://generativelanguage.googleapis.com/v1/", "https://generativelanguage.googleapis.com/v1", VersionedBase, "v1beta"},
		{"gemini with v1alpha", "https://x.test/v1alpha", "https://x.test/v1alpha", VersionedBase, "v1beta"},
		{"not a version", "https://x.test/vertex", "https://x.test/vertex/v1beta", VersionedBase, "v1beta"},
		{"openai SDK form", "https://api.openai.com/v1", "https://api.openai.com/v1", HostOnlyBase, "v1"},
		{"openai bare host", "http://127.0.0.1:11434", "http://127.0.0.1:11434/v1", HostOnlyBase, "v1"},
		{"openai bare host, slash", "http://127.0.0.1:11434/", "http://127.0.0.1:11434/v1", HostOnlyBase, "v1"},
		{"openai prefix kept", "https://api.groq.test/openai/v1", "https://api.groq.test/openai/v1", HostOnlyBase, "v1"},
		{"openai gemini compat kept", "https://g.test/v1beta/openai/", "https://g.test/v1beta/openai", HostOnlyBase, "v1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, tc.f(tc.base, tc.version))
		})
	}
}

func TestSafeURL(t *testing.T) {
	require.Equal(t, "https://proxy.test/v1", SafeURL("https://user:secret@proxy.test/v1?key=secret#x"))
	require.Equal(t, "(unparsable URL)", SafeURL("http://[::1"))
}
