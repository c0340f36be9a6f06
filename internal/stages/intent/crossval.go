package intent

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/voiced/voiced/internal/domain"
)

// stratifiedFolds assigns each example to one of k folds so every intent's
// examples are spread evenly over the folds, in a seeded random order.
func stratifiedFolds(ys []int, classes, k int, seed uint64) []int {
	rng := rand.New(rand.NewPCG(seed, 0x666f6c6473))
	folds := make([]int, len(ys))
	for c := range classes {
		var members []int
		for i, y := range ys {
			if y == c {
				members = append(members, i)
			}
		}
		rng.Shuffle(len(members), func(i, j int) { members[i], members[j] = members[j], members[i] })
		start := rng.IntN(k) // so small classes do not all fill fold 0 first
		for j, i := range members {
			folds[i] = (start + j) % k
		}
	}
	return folds
}

// Prediction is the cross-validated prediction for one example.
type Prediction struct {
	Intent     string // the true intent
	Text       string
	Predicted  string
	Confidence float64
}

// Correct reports whether the prediction matches the true intent.
func (p Prediction) Correct() bool { return p.Predicted == p.Intent }

// CrossValidate trains k classifiers with cfg, each on all but one of k
// stratified folds of the examples, and predicts the held-out examples.
// The predictions include the threshold, so an in-scope example rejected as
// out_of_scope counts as an error.
func CrossValidate(ctx context.Context, intents []domain.Intent, cfg Config, k int) ([]Prediction, error) {
	return CrossValidateNoisy(ctx, intents, cfg, k, nil)
}

// CrossValidateNoisy is CrossValidate with each held-out example passed
// through perturb (when not nil) before it is classified, to measure how
// the classifier copes with recognition errors. Prediction.Text is the
// perturbed text.
func CrossValidateNoisy(ctx context.Context, intents []domain.Intent, cfg Config, k int, perturb func(string) string) ([]Prediction, error) {
	if k < 2 {
		return nil, fmt.Errorf("intent: cross-validate: need at least 2 folds, got %d", k)
	}
	// Folds are made of the written examples; a spoken transcript trains
	// with its example's fold and is never tested, so the recogniser's
	// version of a held-out example does not leak into training.
	written := make([]domain.Intent, len(intents))
	for i, in := range intents {
		written[i] = in
		written[i].Variants = nil
		written[i].Phrases = nil
	}
	names, texts, ys, _ := examples(written)
	spoken := map[string][]domain.Transcript{}
	for _, in := range intents {
		for _, t := range in.Variants {
			spoken[t.Question] = append(spoken[t.Question], t)
		}
	}
	seed := cfg.withDefaults().Seed
	folds := stratifiedFolds(ys, len(names), k, seed)
	var out []Prediction
	for f := range k {
		train := make([]domain.Intent, len(names))
		for c, n := range names {
			train[c].Name = n
			train[c].Phrases = intents[slices.IndexFunc(intents, func(in domain.Intent) bool { return in.Name == n })].Phrases
		}
		for i, t := range texts {
			if folds[i] != f {
				train[ys[i]].Examples = append(train[ys[i]].Examples, t)
				train[ys[i]].Variants = append(train[ys[i]].Variants, spoken[t]...)
			}
		}
		train = slices.DeleteFunc(train, func(in domain.Intent) bool { return len(in.Examples) == 0 })
		c, err := New(ctx, train, cfg)
		if err != nil {
			return nil, fmt.Errorf("intent: cross-validate fold %d: %w", f, err)
		}
		for i, t := range texts {
			if folds[i] != f {
				continue
			}
			if perturb != nil {
				t = perturb(t)
			}
			got, err := c.Classify(ctx, t)
			if err != nil {
				return nil, fmt.Errorf("intent: cross-validate fold %d: %w", f, err)
			}
			out = append(out, Prediction{Intent: names[ys[i]], Text: t, Predicted: got.Name, Confidence: got.Confidence})
		}
	}
	return out, nil
}
