package intent

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// toyData is a small random problem: 60 sparse examples of 40 features in
// 4 classes, the last 10 marked noPrior as article phrases are.
func toyData() (xs []sparse, ys []int, noPrior []bool) {
	const n, features, classes = 60, 40, 4
	rng := rand.New(rand.NewPCG(7, 7))
	for i := range n {
		y := i % classes
		var x sparse
		for f := range features {
			// Each class favours its own quarter of the features.
			if rng.Float64() < 0.15 || (f%classes == y && rng.Float64() < 0.4) {
				x.idx = append(x.idx, int32(f))
				x.val = append(x.val, 0.2+rng.Float64())
			}
		}
		xs, ys, noPrior = append(xs, x), append(ys, y), append(noPrior, i >= n-10)
	}
	return xs, ys, noPrior
}

// referenceTrain is train as it was first written, class by class over an
// example's features. train visits the same (feature, class) updates
// feature by feature, in the weights' memory order; every update reads
// and writes only its own weight and accumulator, so the two must agree
// to the last bit.
func referenceTrain(xs []sparse, ys []int, noPrior []bool, classes, features int, cfg Config) *model {
	m := &model{classes: classes, w: make([]float64, features*classes), b: make([]float64, classes)}
	gw := make([]float64, len(m.w))
	gb := make([]float64, classes)
	order := make([]int, len(xs))
	for i := range order {
		order[i] = i
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x766f69636564))
	p := make([]float64, classes)
	const eps = 1e-8
	for range cfg.Epochs {
		rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		for _, n := range order {
			x := xs[n]
			m.probs(x, 1, p)
			for c := range classes {
				g := p[c]
				if c == ys[n] {
					g--
				}
				if noPrior == nil || !noPrior[n] {
					gb[c] += g * g
					m.b[c] -= cfg.LearningRate * g / (math.Sqrt(gb[c]) + eps)
				}
				for k, f := range x.idx {
					i := int(f)*classes + c
					gi := g*x.val[k] + cfg.L2*m.w[i]
					gw[i] += gi * gi
					m.w[i] -= cfg.LearningRate * gi / (math.Sqrt(gw[i]) + eps)
				}
			}
		}
	}
	return m
}

func TestTrainMatchesReference(t *testing.T) {
	xs, ys, noPrior := toyData()
	for _, seed := range []uint64{1, 2, 9} {
		cfg := Config{Seed: seed}.withDefaults()
		got := must(t)(train(t.Context(), xs, ys, noPrior, 4, 40, cfg))
		want := referenceTrain(xs, ys, noPrior, 4, 40, cfg)
		require.Equal(t, want.w, got.w, "seed %d: weights", seed)
		require.Equal(t, want.b, got.b, "seed %d: biases", seed)
	}
}

// The ensemble is the mean of its members, member i seeded Seed+i, and
// one member is train itself.
func TestTrainEnsemble(t *testing.T) {
	xs, ys, noPrior := toyData()
	cfg := Config{Seed: 5, Models: 3}.withDefaults()
	got := must(t)(trainEnsemble(t.Context(), xs, ys, noPrior, 4, 40, cfg))
	var members []*model
	for i := range 3 {
		member := cfg
		member.Seed = cfg.Seed + uint64(i)
		members = append(members, must(t)(train(t.Context(), xs, ys, noPrior, 4, 40, member)))
	}
	require.NotEqual(t, members[0].w, members[1].w, "members seeded apart must differ, or the test proves nothing")
	for j := range got.w {
		mean := (members[0].w[j] + members[1].w[j] + members[2].w[j]) / 3
		require.InDelta(t, mean, got.w[j], 1e-12, "weight %d", j)
	}
	for j := range got.b {
		mean := (members[0].b[j] + members[1].b[j] + members[2].b[j]) / 3
		require.InDelta(t, mean, got.b[j], 1e-12, "bias %d", j)
	}

	cfg.Models = 1
	one := must(t)(trainEnsemble(t.Context(), xs, ys, noPrior, 4, 40, cfg))
	require.Equal(t, members[0].w, one.w, "one model is train's")
	require.Equal(t, members[0].b, one.b)
}

// must is a model trained without error.
func must(t *testing.T) func(*model, error) *model {
	return func(m *model, err error) *model {
		t.Helper()
		require.NoError(t, err)
		return m
	}
}
