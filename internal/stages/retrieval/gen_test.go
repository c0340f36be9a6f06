package retrieval

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/domain"
)

// generateArticles returns n synthetic articles written with the words of
// the sample domain plus invented ones, drawn with a Zipf distribution as
// words are in real text: 2 to 3 sections of 2 paragraphs of 30 to 70
// words each, like the sample articles but more of them.
func generateArticles(t testing.TB, n int, seed uint64) []domain.Article {
	t.Helper()
	d, err := domain.Default()
	require.NoError(t, err)
	seen := map[string]bool{}
	var vocab []string
	for _, s := range d.CorpusSentences() {
		for _, w := range strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return !(r >= 'a' && r <= 'z') }) {
			if !seen[w] {
				seen[w] = true
				vocab = append(vocab, w)
			}
		}
	}
	for i := range 5000 {
		vocab = append(vocab, fmt.Sprintf("term%d", i))
	}
	rng := rand.New(rand.NewPCG(seed, 42))
	zipf := rand.NewZipf(rng, 1.1, 2, uint64(len(vocab)-1))
	words := func(k int) string {
		ws := make([]string, k)
		for i := range ws {
			ws[i] = vocab[zipf.Uint64()]
		}
		return strings.Join(ws, " ")
	}
	out := make([]domain.Article, n)
	for i := range out {
		var body strings.Builder
		for s := range 2 + rng.IntN(2) {
			if s > 0 {
				fmt.Fprintf(&body, "## %s\n\n", words(2+rng.IntN(3)))
			}
			for range 2 {
				body.WriteString(words(30+rng.IntN(41)) + ".\n\n")
			}
		}
		out[i] = domain.Article{
			ID:    fmt.Sprintf("gen-%04d", i),
			Title: words(3 + rng.IntN(4)),
			Body:  body.String(),
			Path:  fmt.Sprintf("articles/gen-%04d.md", i),
		}
	}
	return out
}
