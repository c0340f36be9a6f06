package intent

import (
	"context"
	"math"
	"math/rand/v2"
)

// model is a multinomial logistic regression over sparse features.
type model struct {
	classes int
	w       []float64 // feature-major: w[f*classes+c]
	b       []float64
}

// trainEnsemble trains cfg.Models models (train), the i-th seeded with
// cfg.Seed+i, and returns their average. The members after the first are
// trained one after another in the same weights and accumulators, so an
// ensemble allocates two models' worth of them rather than 2*Models. It
// stops with ctx's error once ctx is done (train).
func trainEnsemble(ctx context.Context, xs []sparse, ys []int, noPrior []bool, classes, features int, cfg Config) (*model, error) {
	n := max(cfg.Models, 1)
	avg, err := train(ctx, xs, ys, noPrior, classes, features, cfg)
	if err != nil || n == 1 {
		return avg, err
	}
	m := newModel(classes, features)
	gw := make([]float64, len(m.w))
	for i := 1; i < n; i++ {
		member := cfg
		member.Seed = cfg.Seed + uint64(i)
		clear(m.w)
		clear(m.b)
		clear(gw)
		if err := trainInto(ctx, m, gw, xs, ys, noPrior, member); err != nil {
			return nil, err
		}
		for j, w := range m.w {
			avg.w[j] += w
		}
		for j, b := range m.b {
			avg.b[j] += b
		}
	}
	scale := 1 / float64(n)
	for j := range avg.w {
		avg.w[j] *= scale
	}
	for j := range avg.b {
		avg.b[j] *= scale
	}
	return avg, nil
}

func newModel(classes, features int) *model {
	return &model{classes: classes, w: make([]float64, features*classes), b: make([]float64, classes)}
}

// train fits the model by stochastic gradient descent with AdaGrad step
// sizes and L2 regularisation, visiting the examples in a seeded random
// order so the result is deterministic. An example marked noPrior (nil:
// none) leaves the biases alone: a class with many article keywords would
// otherwise be the answer to every text of unknown words. ctx is checked
// once per epoch: a signal during voiced's start-up ends the training
// with ctx's error rather than after it.
func train(ctx context.Context, xs []sparse, ys []int, noPrior []bool, classes, features int, cfg Config) (*model, error) {
	m := newModel(classes, features)
	if err := trainInto(ctx, m, make([]float64, len(m.w)), xs, ys, noPrior, cfg); err != nil {
		return nil, err
	}
	return m, nil
}

// trainInto is train into m, whose weights and biases start at zero, with
// gw the weights' AdaGrad accumulators, also zero.
func trainInto(ctx context.Context, m *model, gw []float64, xs []sparse, ys []int, noPrior []bool, cfg Config) error {
	classes := m.classes
	gb := make([]float64, classes)
	order := make([]int, len(xs))
	for i := range order {
		order[i] = i
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x766f69636564))
	p := make([]float64, classes)
	const eps = 1e-8
	for epoch := 0; epoch < cfg.Epochs; epoch++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		for _, n := range order {
			x := xs[n]
			m.probs(x, 1, p)
			p[ys[n]]-- // p is now the gradient of the loss in the logits
			if noPrior == nil || !noPrior[n] {
				for c, g := range p {
					gb[c] += g * g
					m.b[c] -= cfg.LearningRate * g / (math.Sqrt(gb[c]) + eps)
				}
			}
			// Feature-major, as the weights are laid out: a feature's
			// classes are updated together, in one stretch of memory.
			for k, f := range x.idx {
				v := x.val[k]
				w := m.w[int(f)*classes : int(f+1)*classes]
				acc := gw[int(f)*classes : int(f+1)*classes]
				for c, g := range p {
					gi := g*v + cfg.L2*w[c]
					acc[c] += gi * gi
					w[c] -= cfg.LearningRate * gi / (math.Sqrt(acc[c]) + eps)
				}
			}
		}
	}
	return nil
}

// logits writes the class scores of x into out.
func (m *model) logits(x sparse, out []float64) {
	copy(out, m.b)
	for k, f := range x.idx {
		row := m.w[int(f)*m.classes : int(f+1)*m.classes]
		v := x.val[k]
		for c, w := range row {
			out[c] += w * v
		}
	}
}

// probs writes softmax(logits/temperature) of x into out.
func (m *model) probs(x sparse, temperature float64, out []float64) {
	m.logits(x, out)
	softmax(out, temperature)
}

func softmax(z []float64, temperature float64) {
	maxZ := math.Inf(-1)
	for _, v := range z {
		maxZ = max(maxZ, v)
	}
	if math.IsInf(maxZ, 1) {
		// exp(Inf-Inf) is NaN: the infinite logits share the probability.
		var n float64
		for c, v := range z {
			z[c] = 0
			if math.IsInf(v, 1) {
				z[c] = 1
				n++
			}
		}
		for c := range z {
			z[c] /= n
		}
		return
	}
	var sum float64
	for c, v := range z {
		z[c] = math.Exp((v - maxZ) / temperature)
		sum += z[c]
	}
	for c := range z {
		z[c] /= sum
	}
}

// fitTemperature finds the temperature minimising the negative log
// likelihood of held-out logits (temperature scaling, Guo et al. 2017) by
// golden-section search; the NLL is unimodal in the temperature.
func fitTemperature(logits [][]float64, ys []int) float64 {
	nll := func(t float64) float64 {
		var s float64
		p := make([]float64, 0, 32)
		for i, z := range logits {
			p = append(p[:0], z...)
			softmax(p, t)
			s -= math.Log(max(p[ys[i]], 1e-12))
		}
		return s
	}
	lo, hi := math.Log(0.05), math.Log(20.0)
	phi := (math.Sqrt(5) - 1) / 2
	a, b := hi-phi*(hi-lo), lo+phi*(hi-lo)
	fa, fb := nll(math.Exp(a)), nll(math.Exp(b))
	for range 60 {
		if fa < fb {
			hi, b, fb = b, a, fa
			a = hi - phi*(hi-lo)
			fa = nll(math.Exp(a))
		} else {
			lo, a, fa = a, b, fb
			b = lo + phi*(hi-lo)
			fb = nll(math.Exp(b))
		}
	}
	return math.Exp((lo + hi) / 2)
}
