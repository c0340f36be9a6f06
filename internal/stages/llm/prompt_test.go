package llm

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/pipeline"
	"github.com/voiced/voiced/internal/stages/llm/extractive"
)

// linkedTemplater links the order_status intent to the "tracking" article.
type linkedTemplater struct{}

func (linkedTemplater) Template(pipeline.Intent, string) string { return "" }
func (linkedTemplater) IntentArticles(intent string) []string {
	if intent == "order_status" {
		return []string{"tracking"}
	}
	return nil
}
func (linkedTemplater) Grounded(intent string) bool { return intent != "greeting" }
func (linkedTemplater) Passages(article string) []pipeline.Passage {
	if article != "tracking" {
		return nil
	}
	return []pipeline.Passage{
		{ID: "tracking#0", Title: "Tracking an order", Text: "Open Orders to see where your parcel is."},
		{ID: "tracking#1", Title: "Tracking an order", Text: "The tracking link arrives by email."},
	}
}

// The prompt's reference passages are the evidence the extractive
// responder would quote from: a weak retrieved passage is not handed to a
// model as fact, and an intent's linked articles come before a stronger
// passage from an unrelated one.
func TestPromptPassages(t *testing.T) {
	stores := pipeline.Passage{ID: "stores#0", Title: "Store locations", Text: "Our stores are open from nine.", Score: 5}
	tests := []struct {
		name     string
		req      pipeline.GenerateRequest
		want     []string // passage titles or texts the prompt lists, in order
		notWant  []string
		noneSent bool
	}{
		{name: "strong passages kept, weak left out",
			req: pipeline.GenerateRequest{Transcript: "how do i reset my password", Passages: []pipeline.Passage{
				{ID: "pw#0", Title: "Password reset", Text: "Click Reset password.", Score: 4},
				{ID: "gift#0", Title: "Gift cards", Text: "Gift cards never expire.", Score: 0.3},
			}},
			want: []string{"[1] Password reset"}, notWant: []string{"Gift cards"}},
		{name: "far below the best left out",
			req: pipeline.GenerateRequest{Transcript: "how do i reset my password", Passages: []pipeline.Passage{
				{ID: "pw#0", Title: "Password reset", Text: "Click Reset password.", Score: 6},
				{ID: "acct#0", Title: "Account settings", Text: "Change your name in Settings.", Score: 2},
			}},
			want: []string{"[1] Password reset"}, notWant: []string{"Account settings"}},
		{name: "nothing strong enough: no passages",
			req: pipeline.GenerateRequest{Transcript: "hello", Passages: []pipeline.Passage{
				{ID: "gift#0", Title: "Gift cards", Text: "Gift cards never expire.", Score: 0.2},
			}},
			noneSent: true},
		{name: "a greeting is given no evidence",
			req: pipeline.GenerateRequest{Transcript: "hello there", Intent: pipeline.Intent{Name: "greeting", Confidence: 0.9},
				Passages: []pipeline.Passage{stores}},
			noneSent: true},
		// A linked passage retrieval found (score at least
		// extractive.DefaultMinLinkedScore) comes first...
		{name: "linked article first, the passage found first",
			req: pipeline.GenerateRequest{Transcript: "where is my order", Intent: pipeline.Intent{Name: "order_status", Confidence: 0.9},
				Passages: []pipeline.Passage{stores, {ID: "tracking#1", Title: "Tracking an order", Text: "The tracking link arrives by email.", Score: 3}}},
			want: []string{"[1] Tracking an order: The tracking link", "[2] Tracking an order: Open Orders"}, notWant: []string{"Store locations"}},
		// ...one found by a common word alone does not jump the article's
		// own order.
		{name: "linked article first, in its own order when found weakly",
			req: pipeline.GenerateRequest{Transcript: "where is my order", Intent: pipeline.Intent{Name: "order_status", Confidence: 0.9},
				Passages: []pipeline.Passage{stores, {ID: "tracking#1", Title: "Tracking an order", Text: "The tracking link arrives by email.", Score: 1}}},
			want: []string{"[1] Tracking an order: Open Orders", "[2] Tracking an order: The tracking link"}, notWant: []string{"Store locations"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &Chain{cfg: Config{}.withDefaults(), extractive: extractive.New(extractive.Config{Templater: linkedTemplater{}})}
			msgs := c.buildRequest(tt.req, 100).Messages
			prompt := msgs[len(msgs)-1].Text
			require.Contains(t, prompt, "Caller said: "+tt.req.Transcript)
			// The answer cites what the provider was given, in order.
			sources := c.evidence(tt.req)
			if tt.noneSent {
				require.NotContains(t, prompt, "Reference passages")
				require.Empty(t, sources)
				return
			}
			for i, s := range sources {
				require.Contains(t, prompt, fmt.Sprintf("[%d] %s: %s", i+1, s.Title, s.Text))
			}
			at := 0
			for _, w := range tt.want {
				i := strings.Index(prompt, w)
				require.GreaterOrEqual(t, i, at, "%q missing or out of order in:\n%s", w, prompt)
				at = i
			}
			for _, w := range tt.notWant {
				require.NotContains(t, prompt, w)
			}
		})
	}
}
