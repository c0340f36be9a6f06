package sphinx

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
// configured gain (negative: none).
func newFolder(rate int, gain float64) folder {
	if rate > narrowbandRate || gain <= 0 {
		return folder{}
	}
	return folder{gain: float32(gain)}
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
