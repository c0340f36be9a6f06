package extractive_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/domain"
	"github.com/voiced/voiced/internal/pipeline"
	"github.com/voiced/voiced/internal/stages/intent"
	"github.com/voiced/voiced/internal/stages/llm/extractive"
	"github.com/voiced/voiced/internal/stages/retrieval"
)

// A minimal custom domain (testdata/mini: three trained intents, an
// out_of_scope with a response only, four articles) answers a text through
// the classifier, retrieval and the extractive answer as voiced wires them.
func TestCustomDomainAnswers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	d, err := domain.Load("testdata/mini")
	require.NoError(t, err)
	cls, err := intent.New(ctx, d.Intents, intent.Config{Known: d.KnownText(), Classes: d.Classes})
	require.NoError(t, err)
	ix, err := retrieval.Open(ctx, retrieval.Config{}, d.Articles)
	require.NoError(t, err)
	defer ix.Close()
	r := extractive.New(extractive.Config{Templater: d})

	for _, tt := range []struct {
		question, intent, source, contains string
	}{
		{"what time do you open on saturday", "opening_hours", "opening-hours", "On Saturdays we open at ten"},
		{"can i reserve a table for six", "book_table", "booking", "Tables for more than eight people need a deposit"},
		{"hello", "greeting", "", "Hi, how can I help?"},
		// No intent (a tiny domain's classifier is sure of something
		// for any question): retrieval alone finds the unlinked article.
		{"where can i park my car", "", "parking", "free parking"},
	} {
		t.Run(tt.question, func(t *testing.T) {
			var in pipeline.Intent
			if tt.intent != "" {
				in, err = cls.Classify(ctx, tt.question)
				require.NoError(t, err)
				require.Equal(t, tt.intent, in.Name, "%+v", in)
			}
			ps, err := ix.Retrieve(ctx, tt.question, 3)
			require.NoError(t, err)
			got, sources := r.Respond(pipeline.GenerateRequest{Transcript: tt.question, Intent: in, Passages: ps})
			t.Logf("%q -> %s %.2f: %q %v", tt.question, in.Name, in.Confidence, got, sources)
			require.Contains(t, got, tt.contains)
			if tt.source == "" {
				require.Empty(t, sources)
			} else {
				require.NotEmpty(t, sources)
				require.Equal(t, tt.source, domain.ArticleOf(sources[0].ID))
			}
		})
	}
}
