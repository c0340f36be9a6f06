package llm

import (
	"net/http"
	"testing"

	"github.com/voiced/voiced/internal/stages/llm/anthropic"
	"github.com/voiced/voiced/internal/stages/llm/gemini"
	"github.com/voiced/voiced/internal/stages/llm/provider"
)

func newOtherProvider(t *testing.T, name, url string, client *http.Client) provider.Provider {
	t.Helper()
	switch name {
	case "anthropic":
		return anthropic.New(anthropic.Config{BaseURL: url + "/v1", Model: "anthropic-model", APIKey: anthropicKey, HTTPClient: client})
	case "gemini":
		return gemini.New(gemini.Config{BaseURL: url + "/v1beta", Model: "gemini-model", APIKey: geminiKey, HTTPClient: client})
	}
	t.Fatalf("no test provider %q", name)
	return nil
}
