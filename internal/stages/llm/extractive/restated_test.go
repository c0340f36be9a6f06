package extractive_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/pipeline"
	"github.com/voiced/voiced/internal/stages/llm/extractive"
)

// A template that says what an article says was built from it: the
// answer cites that article first when the template says the best
// sentence (left out of the answer as said already) and the sentence
// quoted is another article's; and when no sentence says the caller's
// words, the sentence the template says of an article retrieval found is
// the answer.
func TestTemplateRestatesArticle(t *testing.T) {
	how := pipeline.Passage{ID: "how#1", Title: "How to return an item", Text: "Start a return on the Orders page and print the label."}
	how2 := pipeline.Passage{ID: "how#2", Title: "How to return an item", Text: "Drop the parcel at any post office."}
	policy := pipeline.Passage{ID: "policy#1", Title: "Return policy", Text: "You can return most items within thirty days of delivery."}
	methods := pipeline.Passage{ID: "methods#1", Title: "Payment methods", Text: "We accept Visa, Mastercard and PayPal cards."}
	methods2 := pipeline.Passage{ID: "methods#2", Title: "Payment methods", Text: "In our stores you can also pay with cash."}
	methods3 := pipeline.Passage{ID: "methods#3", Title: "Payment methods", Text: "PayPal works too."}
	l := linker{
		links: map[string][]string{"return_item": {"how", "policy"}, "return_how": {"how"}, "payment_methods": {"methods"}},
		passages: map[string][]pipeline.Passage{
			"how": {how, how2}, "policy": {policy}, "methods": {methods, methods2, methods3},
		},
	}
	tmpl := templ{
		"return_item":     "You can return most items within thirty days. Print the free label.",
		"return_how":      "Start a return on the Orders page and print the label.",
		"payment_methods": "We accept Visa, Mastercard and PayPal.",
		"out_of_scope":    "Sorry, I can only help with the shop.",
		"":                "Sorry, I can help with Visa, Mastercard and PayPal cards.", // says methods#1
	}
	ask := func(q, intent string, ps ...pipeline.Passage) pipeline.GenerateRequest {
		return pipeline.GenerateRequest{Transcript: q, Intent: pipeline.Intent{Name: intent, Confidence: 1}, Passages: ps}
	}
	tests := []struct {
		name    string
		req     pipeline.GenerateRequest
		want    string
		sources []string
	}{
		{name: "the template says the best sentence, another article's is quoted: the article it says first",
			req:  ask("how many days do i have to return a dress", "return_item", scored(how, 5.5), scored(policy, 4.8)),
			want: tmpl["return_item"] + " Start a return on the Orders page and print the label.", sources: []string{"policy#1", "how#1"}},
		{name: "the template says the best sentence, the quoted one is of the same article: as quoted",
			req:  ask("how do i start a return and drop the parcel", "return_how", scored(how, 6), scored(how2, 5)),
			want: tmpl["return_how"] + " Drop the parcel at any post office.", sources: []string{"how#2"}},
		{name: "no sentence says the caller's words, the template says one of a retrieved article: that sentence",
			req:  ask("what payment methods do you take", "payment_methods", scored(methods2, 11), scored(methods, 10)),
			want: "We accept Visa, Mastercard and PayPal cards.", sources: []string{"methods#1"}},
		{name: "the same, a sentence ranked first shares one of the template's words: the one that says the template",
			req:  ask("what payment methods do you take", "payment_methods", scored(methods3, 12), scored(methods, 10)),
			want: "We accept Visa, Mastercard and PayPal cards.", sources: []string{"methods#1"}},
		{name: "the same, its article not retrieved: the template alone",
			req:  ask("how do i edit", "payment_methods"),
			want: tmpl["payment_methods"]},
		{name: "the same, its article found by a common word alone: the template alone",
			req:  ask("how do i edit", "payment_methods", scored(methods, 1)),
			want: tmpl["payment_methods"]},
		{name: "no intent: the fallback, citing nothing",
			req:  ask("what payment methods do you take", "", scored(methods, 10)),
			want: tmpl[""]},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, sources := extractive.New(extractive.Config{Templater: tmpl, Linker: l}).Respond(tt.req)
			require.Equal(t, tt.want, got)
			require.Equal(t, tt.sources, sourceIDs(sources))
		})
	}
}
