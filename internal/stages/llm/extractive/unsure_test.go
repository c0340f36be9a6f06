package extractive_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/pipeline"
	"github.com/voiced/voiced/internal/stages/llm/extractive"
)

// grounding marks the intents whose response is the whole answer.
type grounding map[string]bool

func (g grounding) Grounded(intent string) bool { return !g[intent] }

// A greeting or goodbye is answered by its response alone, citing
// nothing, unless the classifier is unsure of it and retrieval found a
// strong passage: then the caller asked a question.
func TestUnsureGreeting(t *testing.T) {
	callback := pipeline.Passage{ID: "contact#2", Title: "Contacting a person", Text: "Ask for a call back and someone will call you tomorrow."}
	tmpl := templ{"greeting": "Hi, how can I help?"}
	greet := func(conf, score float64) pipeline.GenerateRequest {
		return pipeline.GenerateRequest{Transcript: "can i get a call back tomorrow morning", Intent: pipeline.Intent{Name: "greeting", Confidence: conf},
			Passages: []pipeline.Passage{scored(callback, score)}}
	}
	tests := []struct {
		name    string
		cfg     extractive.Config
		req     pipeline.GenerateRequest
		want    string
		sources []string
	}{
		{name: "unsure greeting, strong passage: the passage",
			req:  greet(0.41, 13),
			want: "Ask for a call back and someone will call you tomorrow.", sources: []string{"contact#2"}},
		{name: "sure greeting: the response",
			req:  greet(0.95, 13),
			want: "Hi, how can I help?"},
		{name: "no confidence: the response",
			req:  greet(0, 13),
			want: "Hi, how can I help?"},
		{name: "weak passage: the response",
			req:  greet(0.41, extractive.DefaultOverruleScore-0.5),
			want: "Hi, how can I help?"},
		{name: "no passage: the response",
			req:  pipeline.GenerateRequest{Transcript: "hello", Intent: pipeline.Intent{Name: "greeting", Confidence: 0.41}},
			want: "Hi, how can I help?"},
		{name: "rule turned off: the response",
			cfg:  extractive.Config{OverruleScore: -1},
			req:  greet(0.41, 13),
			want: "Hi, how can I help?"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := tt.cfg
			cfg.Templater, cfg.Grounding = tmpl, grounding{"greeting": true}
			r := extractive.New(cfg)
			got, sources := r.Respond(tt.req)
			require.Equal(t, tt.want, got)
			require.Equal(t, tt.sources, sourceIDs(sources))
			// An LLM provider gets the same evidence.
			require.Equal(t, tt.sources, sourceIDs(r.Evidence(tt.req)))
		})
	}
}

// A strong retrieved passage of an article the intent does not link
// overrules an unsure intent even when retrieval also found a later
// linked article by a word or two: that is no better sign of the intent
// than its first article would be.
func TestOverruleBeforeRarerArticle(t *testing.T) {
	howto := pipeline.Passage{ID: "howto#1", Title: "How to return an item", Text: "Start a return on the Orders page."}
	faulty := pipeline.Passage{ID: "faulty#1", Title: "Damaged or faulty items", Text: "If an item arrives broken, send us a photo."}
	mistake := pipeline.Passage{ID: "mistake#1", Title: "Order placed by mistake", Text: "If you ordered something twice by mistake, cancel the second order."}
	l := linker{
		links:    map[string][]string{"return_item": {"howto", "faulty"}},
		passages: map[string][]pipeline.Passage{"howto": {howto}, "faulty": {faulty}},
	}
	tmpl := templ{"return_item": "You can return most items within thirty days."}
	ret := func(conf float64, ps ...pipeline.Passage) pipeline.GenerateRequest {
		return pipeline.GenerateRequest{Transcript: "oops i ordered the backpack twice", Intent: pipeline.Intent{Name: "return_item", Confidence: conf}, Passages: ps}
	}
	tests := []struct {
		name    string
		req     pipeline.GenerateRequest
		sources []string
	}{
		{name: "strong unlinked passage, a later linked article found weakly: overruled",
			req: ret(0.62, scored(mistake, 12), scored(faulty, 2.3)), sources: []string{"mistake#1"}},
		{name: "unlinked passage saying more of the caller's words, under the overrule score: overruled",
			req: ret(0.62, scored(mistake, 8.4), scored(faulty, 2.3)), sources: []string{"mistake#1"}},
		{name: "sure intent, unlinked passage saying no more words than a linked one: the later linked article",
			req: ret(1, scored(faulty, 6), scored(pipeline.Passage{ID: "other#1", Title: "Other", Text: "Backpacks are sold in stores."}, 12)), sources: []string{"faulty#1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, sources := extractive.New(extractive.Config{Templater: tmpl, Linker: l}).Respond(tt.req)
			require.Equal(t, tt.sources, sourceIDs(sources))
		})
	}
}
