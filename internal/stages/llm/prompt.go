package llm

import (
	"fmt"
	"strings"

	"github.com/voiced/voiced/internal/pipeline"
	"github.com/voiced/voiced/internal/stages/llm/provider"
)

const (
	promptPassages    = 3   // top passages sent to a provider
	promptPassageRune = 700 // longest passage text sent, in runes
)

// evidence is what a provider is given to answer req from, and what its
// answer cites as sources: the top passages the extractive responder would
// quote from, none for greetings, goodbyes and out-of-scope requests.
func (c *Chain) evidence(req pipeline.GenerateRequest) []pipeline.Passage {
	passages := c.extractive.Evidence(req)
	return passages[:min(len(passages), promptPassages)]
}

// buildRequest turns the pipeline's request into the provider-independent
// request: the last turns of history, then one user message holding the
// transcript, the intent when known and the top passages of the evidence
// the extractive responder would quote from (so a passage too weak to be
// read aloud is not given to a model as fact either).
func (c *Chain) buildRequest(req pipeline.GenerateRequest, maxTokens int) *provider.Request {
	out := &provider.Request{System: c.cfg.System, MaxOutputTokens: maxTokens}
	hist := req.History[max(0, len(req.History)-c.cfg.HistoryTurns):]
	for _, t := range hist {
		if t.User == "" || t.Assistant == "" {
			continue // providers reject empty messages, and a lone turn would break alternation
		}
		out.Messages = append(out.Messages, provider.Message{Role: provider.RoleUser, Text: t.User}, provider.Message{Role: provider.RoleAssistant, Text: t.Assistant})
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Caller said: %s\n", strings.TrimSpace(req.Transcript))
	if req.Intent.Name != "" {
		fmt.Fprintf(&b, "Detected intent: %s (confidence %.2f)\n", req.Intent.Name, req.Intent.Confidence)
	}
	if passages := c.evidence(req); len(passages) > 0 {
		b.WriteString("Reference passages:\n")
		for i, p := range passages {
			text := []rune(strings.TrimSpace(p.Text))
			if len(text) > promptPassageRune {
				text = append(text[:promptPassageRune], '…')
			}
			fmt.Fprintf(&b, "[%d] %s: %s\n", i+1, p.Title, string(text))
		}
	}
	out.Messages = append(out.Messages, provider.Message{Role: provider.RoleUser, Text: strings.TrimSpace(b.String())})
	return out
}
