package llm

import (
	"flag"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestRegisterFlags(t *testing.T) {
	var cfg Config
	fs := flag.NewFlagSet("voiced", flag.ContinueOnError)
	cfg.RegisterFlags(fs)
	require.NoError(t, fs.Parse([]string{
		"-llm.order=anthropic,openai",
		"-llm.openai.base-url=http://127.0.0.1:11434/v1",
		"-llm.openai.model=llama3.2",
		"-llm.openai.max-tokens-field=max_tokens",
		"-llm.anthropic.ttft-limit=400ms",
		"-llm.auth-fallback",
		"-llm.max-retries=-1",
	}))
	d := cfg.withDefaults()
	require.Equal(t, "anthropic,openai", d.Order)
	require.Equal(t, "http://127.0.0.1:11434/v1", d.OpenAI.BaseURL)
	require.Equal(t, "llama3.2", d.OpenAI.Model)
	require.Equal(t, "max_tokens", d.OpenAI.MaxTokensField)
	require.Equal(t, 400*time.Millisecond, d.Anthropic.TTFTLimit)
	require.Equal(t, "gemini-2.5-flash", d.Gemini.Model)
	require.True(t, d.AuthFallback)
	require.Equal(t, 0, d.MaxRetries)
	require.Nil(t, fs.Lookup("llm.openai.api-key"), "keys come from the environment only")
}

func TestZeroConfigDefaults(t *testing.T) {
	d := Config{}.withDefaults()
	require.Equal(t, "openai,anthropic,gemini", d.Order)
	require.Equal(t, 1, d.MaxRetries)
	require.Equal(t, 30*time.Millisecond, d.Reserve)
	require.Equal(t, 350*time.Millisecond, d.OpenAI.TTFTLimit)
	require.Equal(t, "claude-haiku-4-5", d.Anthropic.Model)
	require.Equal(t, DefaultSystem, d.System)
}
