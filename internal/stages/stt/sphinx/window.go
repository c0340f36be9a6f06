package sphinx

import (
	"math"

	"github.com/voiced/voiced/internal/audio/level"
)

// The cepstral mean, the speaker's pitch (SpeakerWarp) and whether audio
// above 8 kHz was band-limited (NarrowbandFold) are estimated on the
// first CMNWindow of each utterance, before any of it is decoded. An
// utterance does not always start with speech: a push-to-talk user who
// hesitates, or a server turn's prefix audio, can send a second or more
// of silence or room noise first, and all three were then estimated on
// it (docs/benchmarks.md, "A pause before the first word": after 1 s of
// digital silence flite's kal voice upsampled to 16 kHz lost its fold
// and nearly every word, slt lost its warp). So the window is the
// start of the speech, not of the audio: leading frames of non-speech
// are skipped, the audio is still buffered (and afterwards decoded from
// its first sample, so no word is lost), and the estimates wait for
// CMNWindow from shortly before the first speech, or for the bound.

const (
	// speechFrame is the frame, 10 ms at 16 kHz, judged speech or not.
	speechFrame = modelRate / 100
	// speechMinDBFS: a frame quieter than this is never speech (as
	// internal/vad's gate, DefaultGateMinDBFS).
	speechMinDBFS = -60.0
	// speechAboveFloorDB: a frame is speech when it is at least this far
	// above the noise floor (speechStart): the 10 ms frames of stationary
	// noise spread over about 4 dB (white noise: a power of 160 samples
	// varies by 11%), and speech rises 20 dB and more above the noise it
	// is heard in (the flite voices 35 dB above -55 dBFS noise).
	speechAboveFloorDB = 15.0
	// speechLead is kept before the first speech frame: the synthetic
	// voices the settings were chosen on start 200-240 ms into their
	// audio, so the window of an utterance without a pause is the same
	// as when the window was the first audio (and a word's quiet onset
	// stays in it).
	speechLead = modelRate / 4
	// maxSkip bounds the wait: the window starts at most 2 s into the
	// utterance, so at most 2 s + CMNWindow of audio is held undecoded
	// (3 s by default) however long a caller stays silent.
	maxSkip = 2 * modelRate
)

// speechFinder looks for the start of the speech in an utterance's held
// audio, which only grows until the window is found: each 10 ms frame's
// power is measured once, when it arrives, rather than on every Write
// while a pause is held (over up to 3 s of audio, about 35 us a 20 ms
// frame before; BenchmarkCMNWindow). The zero value is ready to use.
type speechFinder struct {
	powers []float64 // of the held audio's whole frames, in order
}

// cmnWindow says where, in the utterance's first audio pcm (16 kHz,
// nothing decoded yet; each call's pcm begins with the last call's), the
// window of n samples the estimates are made from starts: speechLead
// before the first speech frame, at most maxSkip in. ready is false while
// the window is not complete and more audio may come; with final (the
// last audio has arrived) it is always true, and audio with no speech at
// all is estimated from its start, as before.
func (f *speechFinder) cmnWindow(pcm []int16, n int, final bool) (from int, ready bool) {
	f.measure(pcm)
	if len(pcm) < n && !final {
		return 0, false // no window can be complete yet
	}
	start, ok := speechStart(f.powers)
	if !ok {
		if final {
			return 0, true
		}
		start = len(pcm) // the speech, if any, starts after what is here
	}
	from = min(max(0, start-speechLead), maxSkip)
	return from, final || len(pcm)-from >= n
}

// measure adds the power of pcm's whole frames not measured yet. Power
// is measured about the frame's mean, so a DC offset is not sound.
func (f *speechFinder) measure(pcm []int16) {
	for i := len(f.powers); (i+1)*speechFrame <= len(pcm); i++ {
		f.powers = append(f.powers, level.Power(pcm[i*speechFrame:(i+1)*speechFrame]))
	}
}

// speechStart returns the first sample of the first 10 ms frame, of the
// frames whose powers are given, that is speech by energy: at least
// speechAboveFloorDB above the quietest frame louder than speechMinDBFS;
// false when none is (silence, or a steady sound with nothing quieter
// and no silence).
func speechStart(powers []float64) (int, bool) {
	if len(powers) == 0 {
		return 0, false
	}
	minPow := math.Pow(10, speechMinDBFS/10)
	quietest, loudest := math.Inf(1), 0.0 // of the frames above minPow
	silent := false                       // a frame below minPow before any above
	for _, p := range powers {
		if p < minPow {
			silent = silent || math.IsInf(quietest, 1)
			continue
		}
		quietest, loudest = min(quietest, p), max(loudest, p)
	}
	// The noise floor is the quietest frame that is not (near) digital
	// silence: noise followed by a client's or a synthesiser's zeros
	// before the first word would otherwise pass for speech. When nothing
	// rises above it, a steady sound that starts after silence (a short
	// vowel) is speech, and one from the first frame (a hum, or noise the
	// zeros then follow) is not.
	floor := quietest * math.Pow(10, speechAboveFloorDB/10)
	if loudest < floor && silent {
		floor = minPow
	}
	for i, p := range powers {
		if p >= floor {
			return i * speechFrame, true
		}
	}
	return 0, false
}
