package sphinx

import (
	"math"

	"github.com/voiced/voiced/internal/audio/resample"
)

// Narrowband audio (telephone lines, μ-law sessions, 8 kHz clients) holds
// nothing above 4 kHz. The acoustic model was trained on 16 kHz speech,
// whose upper mel filters (up to 6.8 kHz) see the energy of fricatives and
// bursts; upsampled narrowband audio leaves them at the floor, a mismatch
// the model reads as other sounds. The recogniser therefore folds the
// band below 4 kHz into the empty band above it (spectral folding, the
// oldest form of bandwidth extension): at 16 kHz, multiplying a signal by
// (-1)^n moves each frequency f to 8 kHz - f, so x[n]·(1 + g·(-1)^n) keeps
// the original band and adds its mirror image at gain g. It costs one
// multiplication per sample. Measured on the tuning set (docs/benchmarks.md,
// "Narrowband audio"): flite kal, an 8 kHz voice, 26.7% word errors
// without it and 19.2% at g = 0.5; flite slt through the telephone path
// 41.2% and 39.3%.

// DefaultNarrowbandFold is the gain of the mirrored band, chosen on the
// tuning set among 0.15, 0.3, 0.4, 0.5, 0.65 and 0.8.
const DefaultNarrowbandFold = 0.5

// narrowbandRate is the highest input rate folded: its band ends at 4 kHz,
// so the mirror image falls in 4-8 kHz and overlaps nothing.
const narrowbandRate = 8000

// folder applies the fold to resampled audio as it is produced; the
// sign alternates over the whole utterance, across calls.
type folder struct {
	gain float32 // 0: no fold
	odd  bool    // the next sample's index is odd
}

// newFolder returns the fold for audio arriving at rate with the
// configured gain (negative, NaN or infinite: none; Config.validate
// refuses the last two, which would turn every sample into 0).
func newFolder(rate int, gain float64) folder {
	if rate > narrowbandRate || !(gain > 0) || math.IsInf(gain, 0) {
		return folder{}
	}
	return folder{gain: float32(gain)}
}

// FoldNarrowband folds one whole utterance of narrowband audio already
// resampled to 16 kHz, in place, as the recogniser does with gain (the
// engine's is DefaultNarrowbandFold): for tools that must make the
// recogniser's input outside it (cmd/adaptstt -telephone).
func FoldNarrowband(pcm []int16, gain float64) {
	f := newFolder(narrowbandRate, gain)
	f.apply(pcm)
}

// apply folds pcm in place, continuing the previous call's alternation.
func (f *folder) apply(pcm []int16) {
	if f.gain == 0 || len(pcm) == 0 {
		return
	}
	up, down := 1+f.gain, 1-f.gain
	if f.odd {
		up, down = down, up
	}
	for i := range pcm {
		g := up
		if i%2 == 1 {
			g = down
		}
		pcm[i] = clamp16(float32(pcm[i]) * g)
	}
	if len(pcm)%2 == 1 {
		f.odd = !f.odd
	}
}

func clamp16(v float32) int16 {
	switch {
	case v >= 32767:
		return 32767
	case v <= -32768:
		return -32768
	}
	return int16(v)
}

// narrowbandBelowDB is how far below the whole signal's power the power
// above 4.5 kHz must be for 16 kHz audio to count as narrowband: audio
// that was band-limited to 4 kHz before it reached voiced (a telephone
// bridge, a Bluetooth headset's 8 kHz link, a client that upsampled 8 kHz
// audio) keeps only a resampler's leakage there: flite kal's 8 kHz speech
// through voiced's resampler, 92-95 dB down; speech made at 16 kHz or more
// has fricatives and breath there: flite slt, awb and rms and espeak-ng,
// 12-50 dB down over an utterance's first second, whether it starts at once
// or after a pause, with a DC offset or not (TestNarrowbandDetection,
// TestNarrowbandDetectionAfterAPause).
const narrowbandBelowDB = 60

// silentPower is the mean square below which audio says nothing about its
// band (about -70 dBFS): a window of silence is not folded.
const silentPower = 10

// bandSplitter measures the power above 4.5 kHz of 16 kHz audio; its
// prototype resampler (16 to 8 kHz) is shared and cloned per use.
type bandSplitter struct{ proto *resample.Resampler }

func newBandSplitter() (bandSplitter, error) {
	rs, err := resample.New(modelRate, modelRate/2)
	return bandSplitter{rs}, err
}

// narrowband reports whether pcm (16 kHz) has next to nothing above
// 4.5 kHz.
func (b bandSplitter) narrowband(pcm []int16) bool {
	db, ok := b.highBand(pcm)
	return ok && db < -narrowbandBelowDB
}

// edgeTaper is how much of each end of the window highBand fades in and
// out (10 ms).
const edgeTaper = modelRate / 100

// highBand returns the power of pcm (16 kHz) above 4.5 kHz relative to
// its whole power, in dB; false for silence. Multiplying by (-1)^n turns
// the band 4-8 kHz into 0-4 kHz, where the 16-to-8 kHz resampler's
// low-pass keeps it (to 3.5 kHz, so the original 4.5-8 kHz) and drops the
// rest. The window is measured about its mean, with its ends faded (a
// Hann taper of edgeTaper): a caller who pauses before speaking has the
// window end in the middle of a word, and a DC offset makes both of its
// ends steps; the step to the silence the filter sees past an end is a
// click whose spectrum reaches above 4.5 kHz, and 8 kHz speech upsampled
// after a quarter of a second's pause measured 56 dB down, not narrowband
// (TestNarrowbandDetectionAfterAPause).
func (b bandSplitter) highBand(pcm []int16) (float64, bool) {
	var mean float64
	for _, v := range pcm {
		mean += float64(v)
	}
	// Whole samples: rounding every one again would add its own noise,
	// above 4.5 kHz as much as below.
	mean = math.Round(mean / float64(max(1, len(pcm))))
	taper := min(edgeTaper, len(pcm)/2)
	var total float64
	shifted := make([]int16, len(pcm))
	for i, v := range pcm {
		x := float64(v) - mean
		if d := min(i, len(pcm)-1-i); d < taper {
			x = math.Round(x * (0.5 - 0.5*math.Cos(math.Pi*float64(d)/float64(taper))))
		}
		total += x * x
		if i%2 == 1 {
			x = -x
		}
		shifted[i] = clamp16(float32(x))
	}
	total /= float64(max(1, len(pcm)))
	if total < silentPower {
		return 0, false
	}
	rs := b.proto.Clone()
	high := rs.Flush(rs.Process(nil, shifted))
	var hp float64
	for _, v := range high {
		hp += float64(v) * float64(v)
	}
	hp /= float64(max(1, len(high)))
	return 10 * math.Log10(max(hp, 1e-3)/total), true
}
