package llm

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/stages/llm/llmtest"
)

// okReply answers each provider's request with one sentence.
var okReply = map[string]llmtest.Reply{
	OpenAI:    llmtest.OpenAIOK("gpt-4o-mini", "Hello there."),
	Anthropic: llmtest.AnthropicOK("claude-haiku-4-5", "Hello there."),
	Gemini:    llmtest.GeminiOK("gemini-2.5-flash", "Hello there."),
}

var keyEnv = map[string]string{OpenAI: "OPENAI_API_KEY", Anthropic: "ANTHROPIC_API_KEY", Gemini: "GEMINI_API_KEY"}

// baseURLChain builds a chain of the one provider name, with the base URL
// given as the flag (flag, after the fake server's address) and the
// environment (env, likewise), as voiced does: flags, then FromEnv.
func baseURLChain(t *testing.T, name, flag, env string, srvURL string, logs *bytes.Buffer) *Chain {
	t.Helper()
	cfg := Config{Order: name, MaxRetries: -1, HTTPClient: llmtest.HTTPClient(t)}
	if flag != "-" {
		cfg.providers()[name].BaseURL = srvURL + flag
	}
	vars := map[string]string{keyEnv[name]: "test-key-SECRET"}
	if env != "-" {
		vars[baseURLEnv[name]] = srvURL + env
	}
	cfg.FromEnv(func(k string) string { return vars[k] })
	log := slog.New(slog.DiscardHandler)
	if logs != nil {
		log = slog.New(slog.NewTextHandler(&lockedWriter{buf: logs}, nil))
	}
	c, err := New(cfg, testTemplater{}, log, nil)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// TestBaseURLForms: each provider's base URL works in its SDK's form and
// in the form with the API version, from the flag or the SDK's
// environment variable; the flag wins over the variable.
func TestBaseURLForms(t *testing.T) {
	const geminiPath = "/v1beta/models/gemini-2.5-flash:streamGenerateContent"
	for _, tc := range []struct {
		name      string
		provider  string
		flag, env string // "-": not set
		wantPath  string
	}{
		{"openai /v1", OpenAI, "/v1", "-", "/v1/chat/completions"},
		{"openai /v1/", OpenAI, "/v1/", "-", "/v1/chat/completions"},
		{"openai bare host", OpenAI, "", "-", "/v1/chat/completions"},
		{"openai prefix kept", OpenAI, "/api/v1", "-", "/api/v1/chat/completions"},
		{"openai env", OpenAI, "-", "/v1", "/v1/chat/completions"},
		{"openai flag over env", OpenAI, "/v1", "/wrong", "/v1/chat/completions"},
		{"anthropic SDK form", Anthropic, "", "-", "/v1/messages"},
		{"anthropic /v1", Anthropic, "/v1", "-", "/v1/messages"},
		{"anthropic /v1/", Anthropic, "/v1/", "-", "/v1/messages"},
		{"anthropic env SDK form", Anthropic, "-", "", "/v1/messages"},
		{"anthropic env /v1", Anthropic, "-", "/v1", "/v1/messages"},
		{"anthropic flag over env", Anthropic, "/", "/wrong", "/v1/messages"},
		{"gemini SDK form", Gemini, "", "-", geminiPath},
		{"gemini /v1beta", Gemini, "/v1beta", "-", geminiPath},
		{"gemini /v1", Gemini, "/v1", "-", "/v1/models/gemini-2.5-flash:streamGenerateContent"},
		{"gemini env SDK form", Gemini, "-", "/", geminiPath},
		{"gemini env /v1beta", Gemini, "-", "/v1beta", geminiPath},
		{"gemini flag over env", Gemini, "", "/wrong", geminiPath},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := llmtest.NewServer(tc.provider, nil, okReply[tc.provider])
			t.Cleanup(srv.Close)
			c := baseURLChain(t, tc.provider, tc.flag, tc.env, srv.URL, nil)
			ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
			defer cancel()
			gen, err := c.Generate(ctx, helpReq, func(string) {})
			require.NoError(t, err)
			require.Equal(t, tc.provider, gen.Provider)
			rq := srv.Requests()
			require.Len(t, rq, 1)
			require.Equal(t, tc.wantPath, rq[0].Path)
		})
	}
}

// TestBaseURL404ReportedOnce: a base URL that answers 404 is a
// configuration error, logged once naming the setting, while every
// failed attempt is still logged; a 404 for an unknown model is not.
func TestBaseURL404ReportedOnce(t *testing.T) {
	notFound := llmtest.Status(http.StatusNotFound, nil, "404 page not found")
	for _, tc := range []struct {
		name       string
		provider   string
		env        bool
		reply      llmtest.Reply
		wantConfig string // the setting named; "" for no configuration error
	}{
		{"openai flag", OpenAI, false, notFound, "check=-llm.openai.base-url"},
		{"openai env", OpenAI, true, notFound, `check="OPENAI_BASE_URL (or -llm.openai.base-url)"`},
		{"anthropic flag", Anthropic, false, notFound, "check=-llm.anthropic.base-url"},
		{"anthropic env", Anthropic, true, notFound, `check="ANTHROPIC_BASE_URL (or -llm.anthropic.base-url)"`},
		{"gemini flag", Gemini, false, notFound, "check=-llm.gemini.base-url"},
		{"gemini env", Gemini, true, notFound, `check="GOOGLE_GEMINI_BASE_URL (or -llm.gemini.base-url)"`},
		{"openai unknown model", OpenAI, false, llmtest.OpenAIStatus(404, nil, "The model `x` does not exist", "invalid_request_error", "model_not_found"), ""},
		{"anthropic unknown model", Anthropic, false, llmtest.AnthropicStatus(404, nil, "not_found_error", "model: x"), ""},
		{"gemini unknown model", Gemini, false, llmtest.GeminiStatus(404, "NOT_FOUND", "models/x is not found for API version v1beta"), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := llmtest.NewServer(tc.provider, nil, tc.reply)
			t.Cleanup(srv.Close)
			flag, env := "/", "-"
			if tc.env {
				flag, env = "-", "/"
			}
			var logs bytes.Buffer
			c := baseURLChain(t, tc.provider, flag, env, srv.URL, &logs)
			ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
			defer cancel()
			for range 3 {
				gen, err := c.Generate(ctx, helpReq, func(string) {})
				require.NoError(t, err)
				require.Equal(t, "extractive", gen.Provider)
			}
			out := logs.String()
			require.Equal(t, 3, strings.Count(out, `msg="llm attempt failed"`), out)
			if tc.wantConfig == "" {
				require.NotContains(t, out, "configuration error")
				return
			}
			require.Equal(t, 1, strings.Count(out, "llm configuration error"), out)
			require.Contains(t, out, tc.wantConfig)
			require.Contains(t, out, "base_url="+srv.URL+"/")
			require.NotContains(t, out, "SECRET")
		})
	}
}

// TestBadBaseURL: a base URL that is not an absolute http(s) URL is
// refused at start, naming the setting and not echoing the URL.
func TestBadBaseURL(t *testing.T) {
	for _, tc := range []struct {
		name, url, env string
		want           string
	}{
		{"no scheme", "api.anthropic.com", "", "-llm.anthropic.base-url: want an absolute http:// or https:// URL"},
		{"ftp", "ftp://SECRET.test", "", "-llm.anthropic.base-url: want an absolute http:// or https:// URL"},
		{"no host", "https://", "", "want an absolute"},
		{"unparsable", "http://[::1", "", "want an absolute"},
		{"query", "https://x.test/v1?key=SECRET", "", "-llm.anthropic.base-url: a base URL takes no query or fragment"},
		{"from env", "", "SECRET.test/v1", "ANTHROPIC_BASE_URL (or -llm.anthropic.base-url): want an absolute"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{Order: Anthropic}
			cfg.Anthropic.BaseURL = tc.url
			cfg.FromEnv(func(k string) string {
				return map[string]string{"ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": tc.env}[k]
			})
			_, err := New(cfg, testTemplater{}, nil, nil)
			require.ErrorContains(t, err, tc.want)
			require.NotContains(t, err.Error(), "SECRET")
			// Refused by Validate too, which voiced calls before it
			// builds any engine, once.
			err = cfg.Validate()
			require.ErrorContains(t, err, tc.want)
			require.NotContains(t, err.Error(), "llm: llm:")
		})
	}
	// Without a key the provider is not used and its URL not checked.
	cfg := Config{Order: Gemini}
	cfg.Gemini.BaseURL = "nonsense"
	c, err := New(cfg, testTemplater{}, nil, nil)
	require.NoError(t, err)
	c.Close()
}

// TestBaseURL404OpensTheBreaker: a base URL that answers 404 fails every
// request, so it counts against the provider like a broken key and opens
// its breaker: once open, requests are answered without its round trip.
// A 400 for the request itself says nothing of the provider's health and
// never opens it.
func TestBaseURL404OpensTheBreaker(t *testing.T) {
	for _, tc := range []struct {
		name     string
		reply    llmtest.Reply
		wantSent int // of 4 requests, with BreakerFailures 2
	}{
		{"base URL answers 404", llmtest.Status(http.StatusNotFound, nil, "404 page not found"), 2},
		{"the request is wrong (400)", llmtest.OpenAIStatus(400, nil, "bad request", "invalid_request_error", ""), 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := llmtest.NewServer(OpenAI, nil, tc.reply)
			t.Cleanup(srv.Close)
			cfg := Config{Order: OpenAI, MaxRetries: -1, BreakerFailures: 2, HTTPClient: llmtest.HTTPClient(t)}
			cfg.providers()[OpenAI].BaseURL = srv.URL + "/"
			cfg.FromEnv(func(k string) string { return map[string]string{keyEnv[OpenAI]: "test-key"}[k] })
			c, err := New(cfg, testTemplater{}, nil, nil)
			require.NoError(t, err)
			t.Cleanup(func() { c.Close() })
			ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
			defer cancel()
			for range 4 {
				gen, err := c.Generate(ctx, helpReq, func(string) {})
				require.NoError(t, err)
				require.Equal(t, "extractive", gen.Provider)
			}
			require.Len(t, srv.Requests(), tc.wantSent)
		})
	}
}
