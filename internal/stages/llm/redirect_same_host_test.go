package llm

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/stages/llm/anthropic"
	"github.com/voiced/voiced/internal/stages/llm/llmtest"
)

// TestRedirectToHTTPSOnTheSameHost: a base URL given as http:// whose
// server upgrades to https on the same host with a 308 (a gateway or
// proxy in front of the API) is followed: net/http replays the POST, and
// the key stays on the host it was meant for, now encrypted. Only a
// redirect to another host, or from https down to http, is refused
// (TestRedirectDoesNotForwardAPIKey, TestRedirectDowngradeRefused).
func TestRedirectToHTTPSOnTheSameHost(t *testing.T) {
	quit := make(chan struct{})
	defer close(quit)
	ok := llmtest.AnthropicOK("claude-test", "Fine.")
	secure := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { ok(w, r, quit) }))
	defer secure.Close()
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, secure.URL+r.URL.Path, http.StatusPermanentRedirect) // 127.0.0.1 both
	}))
	defer plain.Close()

	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	p := anthropic.New(anthropic.Config{BaseURL: plain.URL, APIKey: "sk-ant-test", HTTPClient: secure.Client()})
	var text string
	_, err := p.Stream(ctx, llmtest.Conversation(), func(s string) { text += s })
	require.NoError(t, err, "an http->https upgrade on the same host")
	require.Equal(t, "Fine.", text)
}

// TestRedirectDowngradeRefused: a redirect from https down to http on the
// same host would send the key in clear text: not followed.
func TestRedirectDowngradeRefused(t *testing.T) {
	reached := make(chan struct{}, 1)
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached <- struct{}{}
		http.Error(w, "nope", http.StatusNotFound)
	}))
	defer plain.Close()
	secure := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, plain.URL+r.URL.Path, http.StatusPermanentRedirect)
	}))
	defer secure.Close()

	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	p := anthropic.New(anthropic.Config{BaseURL: secure.URL, APIKey: "sk-ant-test", HTTPClient: secure.Client()})
	_, err := p.Stream(ctx, llmtest.Conversation(), func(string) {})
	require.Error(t, err)
	select {
	case <-reached:
		t.Fatal("followed a redirect from https to http")
	default:
	}
}
