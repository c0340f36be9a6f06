package resample

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

const out = 16000

// tone returns seconds of a sine at f Hz sampled at rate, amplitude amp.
func tone(rate int, f, amp float64, seconds float64) []int16 {
	n := int(float64(rate) * seconds)
	s := make([]int16, n)
	for i := range s {
		s[i] = int16(amp * math.Sin(2*math.Pi*f*float64(i)/float64(rate)))
	}
	return s
}

// amplitude measures the amplitude of the f Hz component of x (Goertzel
// over whole samples, after skipping the filter's start-up transient).
func amplitude(x []int16, rate int, f float64) float64 {
	var re, im float64
	for i, v := range x {
		ph := 2 * math.Pi * f * float64(i) / float64(rate)
		re += float64(v) * math.Cos(ph)
		im -= float64(v) * math.Sin(ph)
	}
	return 2 * math.Hypot(re, im) / float64(len(x))
}

func rms(x []int16) float64 {
	var s float64
	for _, v := range x {
		s += float64(v) * float64(v)
	}
	return math.Sqrt(s / float64(len(x)))
}

// resampleChunked feeds x in 20 ms chunks, as frames arrive.
func resampleChunked(t *testing.T, in int, x []int16) []int16 {
	return resampleChunkedTo(t, in, out, x)
}

func resampleChunkedTo(t *testing.T, in, out int, x []int16) []int16 {
	t.Helper()
	r, err := New(in, out)
	require.NoError(t, err)
	var y []int16
	chunk := in / 50
	for i := 0; i < len(x); i += chunk {
		y = r.Process(y, x[i:min(i+chunk, len(x))])
	}
	return r.Flush(y)
}

// TestToneSweep sweeps tones across each input rate's band: tones the output
// can represent keep their level (within 0.5 dB), tones above the output
// Nyquist frequency are removed (at least 60 dB down, measured as the whole
// output's RMS, so an alias at any frequency counts), and upsampling leaves
// no image.
func TestToneSweep(t *testing.T) {
	const amp = 10000.0
	type pair struct{ in, out int }
	var pairs []pair
	for _, in := range []int{8000, 16000, 22050, 24000, 44100, 48000} {
		pairs = append(pairs, pair{in, out})
	}
	// Telephone audio: 16 kHz speech out to 8 kHz, and speech synthesised
	// at 24 or 48 kHz straight to 8 kHz.
	pairs = append(pairs, pair{16000, 8000}, pair{24000, 8000}, pair{48000, 8000})
	for _, pr := range pairs {
		in, out := pr.in, pr.out
		t.Run(fmt.Sprintf("%d-%d", in, out), func(t *testing.T) {
			lowNyq := float64(min(in, out)) / 2
			for f := 100.0; f < float64(in)/2; f += 300 {
				x := tone(in, f, amp, 0.5)
				y := resampleChunkedTo(t, in, out, x)
				want := len(x) * out / in
				require.InDelta(t, want, len(y), 2, "output length")
				steady := y[len(y)/5 : len(y)*4/5]
				switch {
				case f <= lowNyq*passband:
					a := amplitude(steady, out, f)
					require.InDelta(t, 0, 20*math.Log10(a/amp), 0.5, "passband tone %.0f Hz", f)
					if in < out {
						img := amplitude(steady, out, float64(in)-f)
						require.Less(t, img/amp, 1e-3, "image of %.0f Hz", f)
					}
					// Nothing but the tone: the residual is tiny.
					require.InDelta(t, amp/math.Sqrt2, rms(steady), amp*0.01)
				case f >= lowNyq:
					require.Less(t, rms(steady)/(amp/math.Sqrt2), 1e-3, "stopband tone %.0f Hz leaked (aliasing)", f)
				}
			}
		})
	}
}

func TestChunkingInvariant(t *testing.T) {
	x := tone(44100, 440, 8000, 0.3)
	r1, err := New(44100, out)
	require.NoError(t, err)
	whole := r1.Flush(r1.Process(nil, x))
	r2, err := New(44100, out)
	require.NoError(t, err)
	var parts []int16
	for i, n := 0, 1; i < len(x); i, n = i+n, n%97+1 {
		parts = r2.Process(parts, x[i:min(i+n, len(x))])
	}
	parts = r2.Flush(parts)
	require.Equal(t, whole, parts)
}

func TestClipsInsteadOfWrapping(t *testing.T) {
	// A full-scale square wave overshoots after filtering (Gibbs); samples
	// must saturate, never wrap around.
	x := make([]int16, 48000/4)
	for i := range x {
		if (i/60)%2 == 0 {
			x[i] = math.MaxInt16
		} else {
			x[i] = math.MinInt16
		}
	}
	y := resampleChunked(t, 48000, x)
	require.Contains(t, y, int16(math.MaxInt16), "overshoot saturates")
	for j := range y {
		i := 3 * j // output j lines up with input 3j
		if i >= len(x) || i%60 < 15 || i%60 > 45 {
			continue // near an edge, where ringing is legitimate
		}
		require.Equal(t, x[i] > 0, y[j] > 0, "sign flipped (wrap-around) at output %d: %d", j, y[j])
	}
}

func TestRates(t *testing.T) {
	for _, tt := range []struct {
		in, out int
		ok      bool
	}{
		{16000, 16000, true}, {8000, 16000, true}, {11025, 16000, true},
		{0, 16000, false}, {-8000, 16000, false}, {1000, 16000, false}, {400000, 16000, false}, {16000, 0, false},
	} {
		_, err := New(tt.in, tt.out)
		if tt.ok {
			require.NoError(t, err)
		} else {
			require.ErrorIs(t, err, ErrRate)
		}
	}
}

func TestReset(t *testing.T) {
	r, err := New(48000, out)
	require.NoError(t, err)
	x := tone(48000, 1000, 5000, 0.1)
	a := r.Flush(r.Process(nil, x))
	r.Reset()
	b := r.Flush(r.Process(nil, x))
	require.Equal(t, a, b)
}

func BenchmarkResample48k(b *testing.B) {
	r, _ := New(48000, out)
	x := tone(48000, 440, 8000, 0.02)
	var y []int16
	b.SetBytes(int64(len(x) * 2))
	for b.Loop() {
		y = r.Process(y[:0], x)
	}
}

func TestCloneIndependent(t *testing.T) {
	proto, err := New(22050, out)
	require.NoError(t, err)
	x := tone(22050, 700, 5000, 0.2)
	a := proto.Clone()
	b := proto.Clone()
	ya := a.Process(nil, x[:1000])
	yb := b.Process(nil, x)
	ya = a.Flush(a.Process(ya, x[1000:]))
	require.Equal(t, b.Flush(yb), ya)
}

// TestNoClicksAtChunkEdges resamples a tone in 20 ms chunks, as a stream
// arrives, and compares every output sample with the best-fitting tone at
// the output rate (the fit absorbs the filter's sub-sample delay): a
// resampler that lost its state at a chunk edge, or restarted its phase,
// would leave a step there, far outside the tolerance. It also checks that
// the chunked output is exactly the one-piece output.
func TestNoClicksAtChunkEdges(t *testing.T) {
	const amp, f = 10000.0, 440.0
	for _, pr := range []struct{ in, out int }{{8000, 16000}, {16000, 8000}, {24000, 8000}, {48000, 8000}} {
		t.Run(fmt.Sprintf("%d-%d", pr.in, pr.out), func(t *testing.T) {
			x := tone(pr.in, f, amp, 1)
			y := resampleChunkedTo(t, pr.in, pr.out, x)
			r, err := New(pr.in, pr.out)
			require.NoError(t, err)
			require.Equal(t, r.Flush(r.Process(nil, x)), y, "chunked output differs from one piece")
			// Skip the filter's start-up and tail transients.
			skip := pr.out / 20
			steady := y[skip : len(y)-skip]
			// Least-squares fit of a*sin + b*cos over whole periods.
			var a, b float64
			for j, v := range steady {
				ph := 2 * math.Pi * f * float64(j) / float64(pr.out)
				a += float64(v) * math.Sin(ph)
				b += float64(v) * math.Cos(ph)
			}
			a, b = 2*a/float64(len(steady)), 2*b/float64(len(steady))
			require.InDelta(t, amp, math.Hypot(a, b), amp*0.01, "tone level")
			worst := 0.0
			for j, v := range steady {
				ph := 2 * math.Pi * f * float64(j) / float64(pr.out)
				worst = max(worst, math.Abs(float64(v)-a*math.Sin(ph)-b*math.Cos(ph)))
			}
			// 0.5 % of the tone's amplitude: rounding, passband ripple and
			// the fit's own error over a non-integer number of periods.
			require.Less(t, worst, amp*5e-3, "worst deviation from the ideal tone")
		})
	}
}

// TestStatelessChunksWouldClick shows TestNoClicksAtChunkEdges can fail:
// resampling each 20 ms chunk with a fresh resampler (the classic bug)
// leaves steps at the chunk edges that the same check catches.
func TestStatelessChunksWouldClick(t *testing.T) {
	x := tone(24000, 440, 10000, 0.2)
	var y []int16
	for i := 0; i < len(x); i += 480 {
		r, err := New(24000, 8000)
		require.NoError(t, err)
		y = r.Flush(r.Process(y, x[i:min(i+480, len(x))]))
	}
	worst := 0.0
	for j := 400; j < len(y)-400; j++ {
		want := 10000 * math.Sin(2*math.Pi*440*float64(j)/8000)
		worst = max(worst, math.Abs(float64(y[j])-want))
	}
	require.Greater(t, worst, 10000*5e-3*10, "a fresh filter per chunk should click")
}
