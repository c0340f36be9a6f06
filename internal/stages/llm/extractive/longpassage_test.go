package extractive_test

import (
	"context"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/domain"
	"github.com/voiced/voiced/internal/pipeline"
	"github.com/voiced/voiced/internal/stages/llm/extractive"
	"github.com/voiced/voiced/internal/stages/retrieval"
)

// longParagraph is a hard-wrapped article's body (no blank lines): one
// passage of over 1,000 sentences. The responder kept a sentence's place
// as rank*1000+pos, so from the 1,001st sentence on it cited the next
// passage, or panicked when there was none.
func longParagraph() string {
	var b strings.Builder
	for i := range 1000 {
		b.WriteString("Clause " + string(rune('A'+i%26)) + " applies to all purchases.\n")
	}
	b.WriteString("The warranty lasts two years from delivery.\n")
	return b.String()
}

func TestLongPassageCitesTheRightSource(t *testing.T) {
	fsys := fstest.MapFS{
		"intents.yaml": {Data: []byte(`intents:
  - name: warranty
    articles: [terms]
    response: Our terms are on the website.
    examples: [how long is the warranty, what does the warranty cover]
  - name: greeting
    grounded: false
    response: Hi.
    examples: [hello, hi there]
`)},
		"articles/terms.md": {Data: []byte("# Terms of sale\n\n" + longParagraph() + "\nReturns are free within thirty days.\n")},
	}
	d, err := domain.LoadFS(fsys, "t")
	require.NoError(t, err)
	ctx := context.Background()
	ix, err := retrieval.Open(ctx, retrieval.Config{}, d.Articles)
	require.NoError(t, err)
	defer ix.Close()
	q := "how long is the warranty"
	ps, err := ix.Retrieve(ctx, q, 3)
	require.NoError(t, err)
	r := extractive.New(extractive.Config{Templater: d})
	got, sources := r.Respond(pipeline.GenerateRequest{Transcript: q, Intent: pipeline.Intent{Name: "warranty", Confidence: 0.95}, Passages: ps})
	require.Contains(t, got, "The warranty lasts two years from delivery.")
	require.Len(t, sources, 1)
	// The quoted sentence is in terms#1; the answer cites terms#2, which it did not quote.
	require.Equal(t, "terms#1", sources[0].ID, "answer %q cites %s", got, sources[0].ID)
}

func TestLongPassageDoesNotPanic(t *testing.T) {
	r := extractive.New(extractive.Config{})
	p := pipeline.Passage{ID: "terms#1", Title: "Terms of sale", Score: 5, Text: strings.ReplaceAll(longParagraph(), "\n", " ")}
	require.NotPanics(t, func() {
		r.Respond(pipeline.GenerateRequest{Transcript: "how long is the warranty", Passages: []pipeline.Passage{p}})
	})
}

// TestStartedWithTheSources: the responder announces what it answers from
// (GenerateRequest.Started) before its first piece, the same as it
// returns.
func TestStartedWithTheSources(t *testing.T) {
	p := pipeline.Passage{ID: "terms#1", Title: "Terms", Score: 5, Text: "The warranty lasts two years from delivery."}
	var events []string
	var started pipeline.Generation
	req := pipeline.GenerateRequest{Transcript: "how long is the warranty", Passages: []pipeline.Passage{p},
		Started: func(g pipeline.Generation) { started = g; events = append(events, "started") }}
	g, err := extractive.New(extractive.Config{}).Generate(context.Background(), req, func(string) { events = append(events, "piece") })
	require.NoError(t, err)
	require.NotEmpty(t, g.Sources)
	require.Equal(t, g, started)
	require.Equal(t, "started", events[0])
	require.Greater(t, len(events), 1)
}
