package sphinx

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// leadIn is ms of lead (silence, a DC offset or white noise at noiseDB)
// followed by ms of "speech" as far as energy goes (a 200 Hz tone at
// -23 dBFS in syllables of 250 ms, each ending in 30 ms 30 dB quieter),
// at 16 kHz.
type leadIn struct {
	lead, speech int // ms
	noiseDB      float64
	dc           int
	steady       bool // no syllables: the tone throughout
	hush         int  // ms of digital silence between the lead and the speech
}

func (l leadIn) pcm() []int16 {
	rng := rand.New(rand.NewPCG(1, 2))
	a := 32768 * math.Pow(10, l.noiseDB/20)
	n := (l.lead + l.hush + l.speech) * modelRate / 1000
	pcm := make([]int16, n)
	for i := range pcm {
		v := float64(l.dc)
		if l.noiseDB != 0 {
			v += rng.NormFloat64() * a
		}
		if i >= l.lead*modelRate/1000 {
			v = 0
		}
		if at := i - (l.lead+l.hush)*modelRate/1000; at >= 0 {
			g := 0.1
			if !l.steady && at%(modelRate/4) >= modelRate*220/1000 {
				g *= 0.03
			}
			v += g * 32768 * math.Sin(2*math.Pi*200*float64(i)/modelRate)
		}
		pcm[i] = clamp16(float32(v))
	}
	return pcm
}

// The window the estimates are made from starts a quarter of a second
// before the first speech, whatever came before it, and waits for a
// whole window of it; a pause of up to 2 s is skipped, longer ones are
// not waited for; the last audio ends the wait.
func TestCMNWindow(t *testing.T) {
	const n = modelRate // a 1 s window
	ms := func(ms int) int { return ms * modelRate / 1000 }
	for _, tc := range []struct {
		in    leadIn
		final bool
		from  int
		ready bool
	}{
		// Speech from the start: the window is the first second, as it
		// always was.
		{leadIn{0, 1000, 0, 0, false, 0}, false, 0, true},
		{leadIn{0, 900, 0, 0, false, 0}, false, 0, false},
		{leadIn{0, 900, 0, 0, false, 0}, true, 0, true},
		// flite's own lead (200-240 ms) is within speechLead: unchanged.
		{leadIn{240, 760, 0, 0, false, 0}, false, 0, true},
		{leadIn{240, 760, -55, 0, false, 0}, false, 0, true},
		// Half a second's pause: the window starts 250 ms before the
		// speech and waits for a second of audio from there.
		{leadIn{500, 500, 0, 0, false, 0}, false, 0, false},
		{leadIn{500, 750, 0, 0, false, 0}, false, ms(250), true},
		{leadIn{500, 750, -55, 0, false, 0}, false, ms(250), true},
		{leadIn{500, 750, 0, 1000, false, 0}, false, ms(250), true}, // a DC offset is no sound
		// A second's pause, in silence, noise or an offset.
		{leadIn{1000, 0, 0, 0, false, 0}, false, 0, false},
		{leadIn{1000, 500, 0, 0, false, 0}, false, 0, false},
		{leadIn{1000, 500, -55, 0, false, 0}, false, 0, false},
		{leadIn{1000, 750, 0, 0, false, 0}, false, ms(750), true},
		{leadIn{1000, 750, -55, 0, false, 0}, false, ms(750), true},
		{leadIn{1000, 750, -40, 0, false, 0}, false, ms(750), true}, // noise 20 dB under the speech
		{leadIn{1000, 750, 0, -1000, false, 0}, false, ms(750), true},
		{leadIn{1000, 400, 0, 0, false, 0}, true, ms(750), true}, // a short word: the last audio ends the wait
		// Noise, then a synthesiser's digital silence (flite starts
		// 200 ms in): the noise is not speech either.
		{leadIn{1000, 750, -55, 0, false, 200}, false, ms(950), true},
		{leadIn{1000, 750, -40, 0, false, 200}, false, ms(950), true},
		{leadIn{1000, 0, -55, 0, false, 200}, false, 0, false}, // not yet
		// Two seconds: the bound.
		{leadIn{2000, 700, -55, 0, false, 0}, false, 0, false},
		{leadIn{2000, 1000, -55, 0, false, 0}, false, ms(1750), true},
		{leadIn{2000, 1000, 0, 0, false, 0}, false, ms(1750), true},
		// Longer: the window starts 2 s in, speech or not.
		{leadIn{2900, 0, 0, 0, false, 0}, false, 0, false},
		{leadIn{3000, 0, 0, 0, false, 0}, false, maxSkip, true},
		{leadIn{3000, 0, -55, 0, false, 0}, false, maxSkip, true},
		{leadIn{2500, 500, 0, 0, false, 0}, false, maxSkip, true},
		// Nothing but a pause, ended: estimated from the start, as before.
		{leadIn{1500, 0, 0, 0, false, 0}, true, 0, true},
		{leadIn{1500, 0, -55, 0, false, 0}, true, 0, true},
		{leadIn{0, 0, 0, 0, false, 0}, true, 0, true},
		// Noise as loud as quiet speech, alone, is not speech.
		{leadIn{1500, 0, -30, 0, false, 0}, false, 0, false},
	} {
		t.Run(fmt.Sprintf("%+v/final=%v", tc.in, tc.final), func(t *testing.T) {
			pcm := tc.in.pcm()
			var once speechFinder
			from, ready := once.cmnWindow(pcm, n, tc.final)
			require.Equal(t, tc.ready, ready)
			if ready {
				require.Equal(t, tc.from, from)
			}
			// Held audio that grows a 20 ms frame (or a ragged piece) at
			// a time, as a recognizer's does, finds the same window.
			for _, step := range []int{320, 317} {
				var f speechFinder
				for end := min(step, len(pcm)); end < len(pcm); end += step {
					f.cmnWindow(pcm[:end], n, false)
				}
				grown, grownReady := f.cmnWindow(pcm, n, tc.final)
				require.Equal(t, ready, grownReady, "step %d", step)
				require.Equal(t, from, grown, "step %d", step)
				require.Len(t, f.powers, len(pcm)/speechFrame, "each frame measured once")
			}
		})
	}
}

// The first speech frame is found to the frame, not only near it: the
// first 10 ms frame of the tone (all of it above the floor) after
// silence, an offset or noise.
func TestSpeechStart(t *testing.T) {
	for _, in := range []leadIn{{0, 300, 0, 0, false, 0}, {730, 100, 0, 0, false, 0}, {730, 100, -55, 0, false, 0}, {730, 100, -70, 0, false, 0}, {730, 100, 0, 3000, false, 0}, {1500, 30, -45, 0, false, 0}} {
		start, ok := startOf(in.pcm())
		require.True(t, ok, "%+v", in)
		require.Equal(t, in.lead*modelRate/1000, start, "%+v", in)
	}
	// Nor is a steady sound with nothing quieter: a hum, not a voice.
	for _, in := range []leadIn{{0, 1000, 0, 0, true, 0}, {0, 0, 0, 0, false, 0}, {1000, 0, 0, 0, false, 0}, {1000, 0, -55, 0, false, 0}, {1000, 0, -30, 0, false, 0}, {1000, 0, 0, 5000, false, 0}} {
		_, ok := startOf(in.pcm())
		require.False(t, ok, "%+v", in)
	}
	_, ok := startOf(make([]int16, speechFrame-1))
	require.False(t, ok, "less than a frame")
}

// startOf is speechStart over pcm's frames.
func startOf(pcm []int16) (int, bool) {
	var f speechFinder
	f.measure(pcm)
	return speechStart(f.powers)
}

// BenchmarkCMNWindow: the window is looked for on every Write while a
// pause is held (at most 3 s by default); a Write adds 20 ms to the
// audio held, 2.9 s of it here.
func BenchmarkCMNWindow(b *testing.B) {
	pcm := leadIn{2900, 0, -55, 0, false, 0}.pcm()
	var f speechFinder
	f.cmnWindow(pcm[:len(pcm)-320], modelRate, false)
	for b.Loop() {
		f.powers = f.powers[:len(f.powers)-2] // the last 20 ms is new
		f.cmnWindow(pcm, modelRate, false)
	}
}
