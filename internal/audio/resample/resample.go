// Package resample converts 16-bit PCM between sample rates with a
// polyphase windowed-sinc (Kaiser) low-pass filter, streaming: input may
// arrive in chunks of any size and the output is the same as for one chunk.
//
// The filter passes up to 7/8 of the lower Nyquist frequency and attenuates
// by at least 80 dB from that Nyquist frequency on, so tones the output rate
// cannot represent are removed rather than aliased (when downsampling), and
// spectral images are removed (when upsampling).
package resample

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
)

// ErrRate is returned for a sample rate the resampler does not accept.
var ErrRate = errors.New("resample: unsupported sample rate")

const (
	// MinRate and MaxRate bound the accepted sample rates.
	MinRate = 4000
	MaxRate = 192000

	stopbandDB = 80.0
	passband   = 0.875 // of the lower Nyquist frequency
)

// Resampler converts a stream from one rate to another. It is not safe for
// concurrent use.
type Resampler struct {
	l, m   int         // upsample by l, downsample by m (reduced)
	k      int         // taps per phase
	phases [][]float32 // phases[p][k-1-j]: prototype tap p + j*l, reversed so a dot product runs forward over the input
	buf    []float32   // input, oldest first; the first k-1 are history
	pos    int         // next output position in units of 1/l input samples, relative to buf[0]
	taken  int64       // input samples since Reset
	given  int64       // output samples since Reset
	pass   bool
}

// New returns a resampler from inRate to outRate Hz.
func New(inRate, outRate int) (*Resampler, error) {
	for _, r := range []int{inRate, outRate} {
		if r < MinRate || r > MaxRate {
			return nil, fmt.Errorf("%w: %d Hz (want %d..%d)", ErrRate, r, MinRate, MaxRate)
		}
	}
	if inRate == outRate {
		return &Resampler{pass: true}, nil
	}
	g := gcd(inRate, outRate)
	l, m := outRate/g, inRate/g
	nyq := float64(min(inRate, outRate)) / 2
	trans := nyq * (1 - passband)
	cutoff := nyq - trans/2
	// Kaiser's formulas for the window length and shape.
	beta := 0.1102 * (stopbandDB - 8.7)
	protoRate := float64(inRate) * float64(l)
	n := int(math.Ceil((stopbandDB - 7.95) / (2.285 * 2 * math.Pi * trans / protoRate)))
	k := (n + l - 1) / l
	n = k * l
	fc := cutoff / protoRate // normalised cutoff, cycles per prototype sample
	center := float64(n-1) / 2
	i0b := besselI0(beta)
	r := &Resampler{l: l, m: m, k: k, phases: make([][]float32, l)}
	for p := range r.phases {
		r.phases[p] = make([]float32, k)
	}
	for i := range n {
		x := float64(i) - center
		h := 2 * fc * sinc(2*fc*x)
		ratio := x / center
		w := besselI0(beta*math.Sqrt(max(0, 1-ratio*ratio))) / i0b
		// Gain l makes up for the zeros stuffed between input samples.
		r.phases[i%l][k-1-i/l] = float32(h * w * float64(l))
	}
	r.Reset()
	return r, nil
}

// Reset clears the filter history for a new stream.
func (r *Resampler) Reset() {
	if r.pass {
		return
	}
	r.buf = r.buf[:0]
	for range r.k - 1 {
		r.buf = append(r.buf, 0)
	}
	r.taken, r.given = 0, 0
	// Start half the filter length later, so that output sample j lines
	// up with input time j*m/l instead of lagging by the filter's delay.
	r.pos = (r.k-1)*r.l + (r.k*r.l-1)/2
}

// Delay is the filter's delay in input samples.
func (r *Resampler) Delay() int {
	if r.pass {
		return 0
	}
	return r.k / 2
}

// Process resamples in and appends the result to out.
func (r *Resampler) Process(out, in []int16) []int16 {
	if r.pass {
		return append(out, in...)
	}
	for _, s := range in {
		r.buf = append(r.buf, float32(s))
	}
	r.taken += int64(len(in))
	for {
		i, p := r.pos/r.l, r.pos%r.l
		if i >= len(r.buf) {
			break
		}
		out = append(out, clamp(dot(r.phases[p], r.buf[i-r.k+1:i+1])))
		r.given++
		r.pos += r.m
	}
	if drop := r.pos/r.l - (r.k - 1); drop > 0 {
		drop = min(drop, len(r.buf))
		n := copy(r.buf, r.buf[drop:])
		r.buf = r.buf[:n]
		r.pos -= drop * r.l
	}
	if cap(r.buf) > maxKeptInput && len(r.buf) <= maxKeptInput/2 {
		// One chunk far larger than the stream's others grew the buffer:
		// a stream may last hours, and must not keep it.
		r.buf = slices.Clone(r.buf)
	}
	return out
}

// maxKeptInput is the largest input buffer, in samples, a resampler keeps
// between chunks: 340 ms at 48 kHz, well above a chunk and a filter's
// length.
const maxKeptInput = 16 << 10

// Flush pushes the samples still inside the filter out by feeding silence
// past the filter's delay, and appends them to out: in all, a stream of n
// samples gives ceil(n*outRate/inRate), the output samples that fall
// before its end (none for an empty stream). Reset before another stream.
func (r *Resampler) Flush(out []int16) []int16 {
	if r.pass {
		return out
	}
	due := (r.taken*int64(r.l)+int64(r.m)-1)/int64(r.m) - r.given
	start := len(out)
	out = r.Process(out, make([]int16, r.k/2+1))
	return out[:start+int(min(max(due, 0), int64(len(out)-start)))]
}

// dot is the dot product of taps and x (the same length), in four
// independent sums so the additions can overlap.
func dot(taps, x []float32) float32 {
	x = x[:len(taps)]
	var a0, a1, a2, a3 float32
	j := 0
	for ; j+4 <= len(taps); j += 4 {
		t, v := taps[j:j+4:j+4], x[j:j+4:j+4]
		a0 += t[0] * v[0]
		a1 += t[1] * v[1]
		a2 += t[2] * v[2]
		a3 += t[3] * v[3]
	}
	for ; j < len(taps); j++ {
		a0 += taps[j] * x[j]
	}
	return (a0 + a1) + (a2 + a3)
}

func clamp(v float32) int16 {
	switch {
	case v >= math.MaxInt16:
		return math.MaxInt16
	case v <= math.MinInt16:
		return math.MinInt16
	}
	return int16(math.Round(float64(v)))
}

func sinc(x float64) float64 {
	if x == 0 {
		return 1
	}
	return math.Sin(math.Pi*x) / (math.Pi * x)
}

// besselI0 is the zeroth-order modified Bessel function of the first kind,
// by its power series (converges quickly for the betas used here).
func besselI0(x float64) float64 {
	sum, term := 1.0, 1.0
	for k := 1; k < 50; k++ {
		term *= (x / 2) / float64(k)
		sum += term * term
		if term*term < sum*1e-16 {
			break
		}
	}
	return sum
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// Clone returns a resampler with the same filter and fresh state. The
// filter tables are shared (they are never written after New), so a clone
// is cheap; clones may be used concurrently with each other.
func (r *Resampler) Clone() *Resampler {
	c := &Resampler{l: r.l, m: r.m, k: r.k, phases: r.phases, pass: r.pass}
	c.Reset()
	return c
}

// Filters caches one filter per pair of rates, for the many streams that
// resample between the same rates: Get returns a clone with fresh state
// (the tables are shared and never written). The zero value is ready; it
// is safe for concurrent use. It keeps every pair it was asked for, so
// its callers ask for a bounded set of rates.
type Filters struct {
	mu sync.Mutex
	m  map[[2]int]*Resampler
}

// Get returns a resampler from in to out Hz with fresh state.
func (f *Filters) Get(in, out int) (*Resampler, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	k := [2]int{in, out}
	r, ok := f.m[k]
	if !ok {
		var err error
		if r, err = New(in, out); err != nil {
			return nil, err
		}
		if f.m == nil {
			f.m = map[[2]int]*Resampler{}
		}
		f.m[k] = r
	}
	return r.Clone(), nil
}
