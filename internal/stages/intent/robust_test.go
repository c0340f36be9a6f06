package intent

import (
	"context"
	"math"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/domain"
	"github.com/voiced/voiced/internal/pipeline"
)

// withOOS is finiteIntents with an out_of_scope class.
var withOOS = append(append([]domain.Intent(nil), finiteIntents...),
	domain.Intent{Name: OutOfScope, Examples: []string{"what is the weather", "tell me a joke", "who won the game"}})

// quick trains a small, fast classifier.
func quick(t *testing.T, in []domain.Intent, cfg Config) *Classifier {
	cfg.Models, cfg.Epochs = 2, 3
	c, err := New(t.Context(), in, cfg)
	require.NoError(t, err)
	return c
}

// checkResult fails unless got is a valid result of c.
func checkResult(t *testing.T, c *Classifier, what string, got pipeline.Intent) {
	t.Helper()
	require.False(t, math.IsNaN(got.Confidence) || got.Confidence < 0 || got.Confidence > 1,
		"%s: confidence %v", what, got.Confidence)
	require.Contains(t, append(c.Classes(), OutOfScope), got.Name, what)
}

// TestClassifyInputs: any text (empty, punctuation, fillers, 10,000
// words, unicode, invalid UTF-8) gives a valid, finite result, the same
// every time, with and without an out_of_scope class.
func TestClassifyInputs(t *testing.T) {
	lex := mapLexicon{"hello": "HH AH L OW", "refund": "R IY F AH N D", "we'll": "W IY L"}
	for _, in := range [][]domain.Intent{finiteIntents, withOOS} {
		c := quick(t, in, Config{Lexicon: lex, Classes: map[string][]string{"thing": {"order", "lamp"}}})
		long := strings.Repeat("refund my order please zxqv ", 2500)
		for _, text := range []string{"", "   ", "?!.,", "'''", "’’", "um uh er", long, "ñandú café 東京 👍", "123 4567",
			"we'll", "zzqx blorf", "a", strings.Repeat("x", 10000), "\x00\xff\xfe"} {
			got, err := c.Classify(context.Background(), text)
			require.NoError(t, err)
			checkResult(t, c, text[:min(len(text), 20)], got)
			if p := c.Probabilities(text); p != nil {
				var s float64
				for _, v := range p {
					require.False(t, math.IsNaN(v) || math.IsInf(v, 0))
					s += v
				}
				require.InDelta(t, 1, s, 1e-9)
			}
			got2, _ := c.Classify(context.Background(), text)
			require.Equal(t, got, got2)
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := c.Classify(ctx, "hello")
		require.Error(t, err)
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for range 50 {
					c.Classify(context.Background(), "refund my lamp please")
				}
			})
		}
		wg.Wait()
	}
}

// A first hypothesis with a non-finite score (NaN, or ±Inf, where
// score_0-score_0 is NaN) makes every weight NaN and the confidence NaN.
func TestAlternativesNonFiniteScore(t *testing.T) {
	c := quick(t, withOOS, Config{Alternatives: 3})
	for _, s := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		got, err := c.ClassifyAlternatives(context.Background(), []pipeline.Hypothesis{
			{Text: "refund my order", Score: s}, {Text: "refund my order", Score: -1}, {Text: "hello", Score: -2}})
		require.NoError(t, err)
		checkResult(t, c, "first score", got)
	}
	// NaN in a later hypothesis.
	got, err := c.ClassifyAlternatives(context.Background(), []pipeline.Hypothesis{
		{Text: "refund my order", Score: -1}, {Text: "hello", Score: math.NaN()}})
	require.NoError(t, err)
	checkResult(t, c, "later NaN", got)
}

// Without an out_of_scope class, a wordless first hypothesis (weight 1)
// and a far weaker second one: total -= empty cancels catastrophically, so
// the mixture no longer sums to 1 and the confidence can exceed 1.
func TestAlternativesCancellation(t *testing.T) {
	c := quick(t, finiteIntents, Config{Alternatives: 2, Threshold: -1})
	d := math.Log(3e-16) / DefaultAlternativeScale
	got, err := c.ClassifyAlternatives(context.Background(), []pipeline.Hypothesis{
		{Text: "uh", Score: 0}, {Text: "?", Score: 0}}) // sanity: both wordless
	require.NoError(t, err)
	checkResult(t, c, "both empty", got)
	got, err = c.ClassifyAlternatives(context.Background(), []pipeline.Hypothesis{
		{Text: "...", Score: 0}, {Text: "refund my order", Score: d}})
	require.NoError(t, err)
	want, _ := c.Classify(context.Background(), "refund my order")
	checkResult(t, c, "cancellation", got)
	require.InDelta(t, want.Confidence, got.Confidence, 1e-6)
}

// A huge but finite UnknownWeight passes valid(), but with two unknown words
// the out_of_scope logit overflows to +Inf and softmax gives NaN.
func TestHugeUnknownWeight(t *testing.T) {
	c := quick(t, withOOS, Config{})
	d, err := c.WithUnknown(1e308, 0)
	require.NoError(t, err)
	got, err := d.Classify(context.Background(), "pharmacy wifi")
	require.NoError(t, err)
	checkResult(t, d, "huge weight", got)
}

// A lexicon pronunciation that is empty (ok true) leaves phone starts equal,
// and addPhones slices seq[0:-1].
func TestEmptyPronunciation(t *testing.T) {
	lex := mapLexicon{"uh": "", "hello": "HH AH L OW"}
	c := quick(t, finiteIntents, Config{Lexicon: lex})
	require.NotPanics(t, func() { c.Classify(context.Background(), "uh uh uh hello") })
}
