package llm

import (
	"fmt"
	"net/http"

	"github.com/voiced/voiced/internal/stages/llm/anthropic"
	"github.com/voiced/voiced/internal/stages/llm/gemini"
	"github.com/voiced/voiced/internal/stages/llm/openai"
	"github.com/voiced/voiced/internal/stages/llm/provider"
)

// newProvider builds the named provider from cfg, or returns nil when it
// has no API key.
func newProvider(name string, cfg Config, client *http.Client) (provider.Provider, ProviderConfig, error) {
	if pc, ok := cfg.providers()[name]; ok && pc.APIKey != "" {
		if err := checkBaseURL(name, *pc); err != nil {
			return nil, *pc, err
		}
	}
	switch name {
	case OpenAI:
		pc := cfg.OpenAI
		if pc.APIKey == "" {
			return nil, pc, nil
		}
		p, err := openai.New(openai.Config{BaseURL: pc.BaseURL, Model: pc.Model, APIKey: pc.APIKey, MaxTokensField: pc.MaxTokensField, HTTPClient: client})
		if err != nil {
			return nil, pc, fmt.Errorf("llm: %w", err)
		}
		return p, pc, nil
	case Anthropic:
		pc := cfg.Anthropic
		if pc.APIKey == "" {
			return nil, pc, nil
		}
		return anthropic.New(anthropic.Config{BaseURL: pc.BaseURL, Model: pc.Model, APIKey: pc.APIKey, HTTPClient: client}), pc, nil
	case Gemini:
		pc := cfg.Gemini
		if pc.APIKey == "" {
			return nil, pc, nil
		}
		return gemini.New(gemini.Config{BaseURL: pc.BaseURL, Model: pc.Model, APIKey: pc.APIKey, HTTPClient: client}), pc, nil
	}
	return nil, ProviderConfig{}, fmt.Errorf("llm: unknown provider %q", name)
}
