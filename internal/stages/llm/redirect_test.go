package llm

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/stages/llm/anthropic"
	"github.com/voiced/voiced/internal/stages/llm/gemini"
	"github.com/voiced/voiced/internal/stages/llm/llmtest"
	"github.com/voiced/voiced/internal/stages/llm/openai"
	"github.com/voiced/voiced/internal/stages/llm/provider"
)

// TestRedirectDoesNotForwardAPIKey: a provider endpoint (or a proxy
// in front of it) that answers with a redirect to another host must not
// receive our API key there. net/http strips only Authorization (and
// cookies) on a cross-host redirect; Anthropic's x-api-key and Gemini's
// x-goog-api-key are custom headers and are copied to the new host, with
// the request body (307/308 replay the POST).
func TestRedirectDoesNotForwardAPIKey(t *testing.T) {
	const secret = "sk-REDIRECT-SECRET-0123456789"
	for _, tc := range []struct {
		name string
		mk   func(base string, c *http.Client) provider.Provider
	}{
		{"openai", func(base string, c *http.Client) provider.Provider {
			p, err := openai.New(openai.Config{BaseURL: base + "/v1", APIKey: secret, HTTPClient: c})
			require.NoError(t, err)
			return p
		}},
		{"anthropic", func(base string, c *http.Client) provider.Provider {
			return anthropic.New(anthropic.Config{BaseURL: base, APIKey: secret, HTTPClient: c})
		}},
		{"gemini", func(base string, c *http.Client) provider.Provider {
			return gemini.New(gemini.Config{BaseURL: base, APIKey: secret, HTTPClient: c})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var (
				mu      sync.Mutex
				leaked  []string
				reached bool
			)
			other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				reached = true
				for k, vs := range r.Header {
					for _, v := range vs {
						if strings.Contains(v, secret) {
							leaked = append(leaked, k)
						}
					}
				}
				mu.Unlock()
				http.Error(w, "nope", http.StatusNotFound)
			}))
			defer other.Close()
			// Another host: "localhost" instead of "127.0.0.1".
			otherURL := strings.Replace(other.URL, "127.0.0.1", "localhost", 1)
			origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, otherURL+r.URL.Path, http.StatusTemporaryRedirect)
			}))
			defer origin.Close()

			ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
			defer cancel()
			_, err := tc.mk(origin.URL, llmtest.HTTPClient(t)).Stream(ctx, llmtest.Conversation(), func(string) {})
			pe, ok := errors.AsType[*provider.Error](err)
			require.True(t, ok, "%v", err)
			require.Equal(t, provider.KindInvalidRequest, pe.Kind, "a redirect is a wrong base URL")
			require.Equal(t, http.StatusTemporaryRedirect, pe.Status)
			mu.Lock()
			defer mu.Unlock()
			require.Empty(t, leaked, "API key forwarded to the redirect target in headers %v", leaked)
			require.False(t, reached, "the redirect was followed")
		})
	}
}
