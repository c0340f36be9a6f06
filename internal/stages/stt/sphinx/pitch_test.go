package sphinx

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// voicedSignal is 16 kHz audio like a sustained vowel at f0 Hz: a pulse
// train (the glottis) through two resonances (formants at 700 and 1200
// Hz), with a little noise.
func voicedSignal(f0 float64, seconds float64, seed uint64) []int16 {
	n := int(seconds * modelRate)
	rng := rand.New(rand.NewPCG(seed, 1))
	out := make([]int16, n)
	type res struct{ a1, a2, y1, y2 float64 }
	mk := func(f, bw float64) res {
		r := math.Exp(-math.Pi * bw / modelRate)
		return res{a1: 2 * r * math.Cos(2*math.Pi*f/modelRate), a2: -r * r}
	}
	rs := []res{mk(700, 80), mk(1200, 100)}
	period := modelRate / f0
	next := 0.0
	for i := range n {
		x := rng.NormFloat64() * 0.01
		if float64(i) >= next {
			x += 1
			next += period
		}
		for k := range rs {
			y := x + rs[k].a1*rs[k].y1 + rs[k].a2*rs[k].y2
			rs[k].y2, rs[k].y1 = rs[k].y1, y
			x = y
		}
		out[i] = int16(max(-32000, min(32000, x*40)))
	}
	return out
}

func TestMedianPitch(t *testing.T) {
	noise := make([]int16, modelRate)
	rng := rand.New(rand.NewPCG(7, 7))
	for i := range noise {
		noise[i] = int16(rng.NormFloat64() * 3000)
	}
	for _, tc := range []struct {
		name   string
		pcm    []int16
		wantHz float64 // 0: no estimate
	}{
		{"low voice 100 Hz", voicedSignal(100, 1, 1), 100},
		{"male voice 130 Hz", voicedSignal(130, 1, 2), 130},
		{"female voice 200 Hz", voicedSignal(200, 1, 3), 200},
		{"child's voice 280 Hz", voicedSignal(280, 1, 4), 280},
		{"silence", make([]int16, modelRate), 0},
		{"noise", noise, 0},
		{"too short", voicedSignal(200, 0.03, 5), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hz, voiced := medianPitch(tc.pcm)
			if tc.wantHz == 0 {
				require.Zero(t, hz, "%d voiced frames", voiced)
				return
			}
			// The lag is whole samples at 4 kHz: 200 Hz is 20 samples,
			// the next are 190 and 210 Hz.
			require.InEpsilon(t, tc.wantHz, hz, 0.06, "%d voiced frames", voiced)
			require.Greater(t, voiced, 80)
		})
	}
}

func BenchmarkMedianPitch(b *testing.B) {
	pcm := voicedSignal(180, 1, 1)
	for b.Loop() {
		medianPitch(pcm)
	}
}
