package sphinx

import (
	"math"
	"slices"
)

// Defaults of Config.SpeakerWarp and Config.WarpPitch. The warp was
// chosen on the tuning data among 1.1 to 1.5: flite slt's tuning set and
// the tuning half of Asterisk's prompts (people's speech) both gain most
// around 1.35 (docs/benchmarks.md, "A warp for high voices"). The pitch
// lies between the low voices measured (77-148 Hz) and the high ones
// (174-250 Hz), at the usual boundary between men's and women's voices.
const (
	DefaultSpeakerWarp = 1.35
	DefaultWarpPitch   = 160.0
)

// Pitch estimation for choosing a speaker's frequency warp
// (Config.SpeakerWarp).
//
// The voice's fundamental frequency says little about one vowel but much
// about the speaker: voices around 200 Hz (most women's, children's) come
// from shorter vocal tracts, whose formants sit higher than those of the
// voices the acoustic model mostly heard. The estimate is a normalised
// cross-correlation over the first second of the speech (cmnWindow), at
// 4 kHz (a 16 kHz signal averaged in fours), in 40 ms frames every 10 ms;
// a frame counts as voiced when its best correlation in 70-400 Hz is
// strong and it is not much quieter than the loudest frame. It costs
// about 1-2 ms of CPU per second of audio (BenchmarkMedianPitch).
const (
	pitchRate      = 4000                                     // Hz, after decimation
	pitchFrame     = 160                                      // 40 ms at pitchRate
	pitchHop       = 40                                       // 10 ms
	pitchMinLag    = pitchRate / 400                          // 400 Hz
	pitchMaxLag    = pitchRate / 70                           // 70 Hz
	pitchVoiced    = 0.7                                      // least normalised correlation of a voiced frame
	pitchQuiet     = 0.03                                     // least frame energy, relative to the loudest (-15 dB)
	pitchMinFrames = 10                                       // voiced frames needed for an estimate
	pitchDecimate  = modelRate / pitchRate                    // 4
	pitchWindow    = pitchFrame + pitchMaxLag + pitchDecimate // samples a frame reads, at pitchRate
)

// medianPitch returns the median fundamental frequency (Hz) of the voiced
// frames of pcm, 16 kHz audio, and how many frames were voiced; 0 when
// fewer than pitchMinFrames were.
func medianPitch(pcm []int16) (hz float64, voiced int) {
	x := make([]float64, len(pcm)/pitchDecimate)
	for i := range x {
		var s float64
		for _, v := range pcm[i*pitchDecimate : (i+1)*pitchDecimate] {
			s += float64(v)
		}
		x[i] = s / pitchDecimate
	}
	if len(x) < pitchWindow {
		return 0, 0
	}
	// sq[i] is the energy of x[:i], so that of any window is a
	// difference.
	sq := make([]float64, len(x)+1)
	for i, v := range x {
		sq[i+1] = sq[i] + v*v
	}
	type frame struct{ energy, hz, corr float64 }
	var frames []frame
	var loudest float64
	for start := 0; start+pitchFrame+pitchMaxLag <= len(x); start += pitchHop {
		f := frame{energy: sq[start+pitchFrame] - sq[start]}
		loudest = max(loudest, f.energy)
		f.hz, f.corr = bestLag(x[start:start+pitchFrame+pitchMaxLag], sq[start:start+pitchFrame+pitchMaxLag+1])
		frames = append(frames, f)
	}
	var pitches []float64
	for _, f := range frames {
		if f.corr >= pitchVoiced && f.energy >= pitchQuiet*loudest && f.energy > 0 {
			pitches = append(pitches, f.hz)
		}
	}
	if len(pitches) < pitchMinFrames {
		return 0, len(pitches)
	}
	slices.Sort(pitches)
	return pitches[len(pitches)/2], len(pitches)
}

// bestLag returns the frequency of the lag in [pitchMinLag, pitchMaxLag]
// at which w's first pitchFrame samples correlate best with themselves
// shifted, and that normalised correlation. sq[j]-sq[i] is the energy of
// w[i:j].
func bestLag(w, sq []float64) (hz, corr float64) {
	head := w[:pitchFrame]
	energy := sq[pitchFrame] - sq[0]
	var cs [pitchMaxLag + 2]float64
	best := -1.0
	for lag := pitchMinLag; lag <= pitchMaxLag; lag++ {
		e := sq[lag+pitchFrame] - sq[lag]
		if e <= 0 || energy <= 0 {
			continue
		}
		cs[lag] = dot(head, w[lag:lag+pitchFrame]) / math.Sqrt(energy*e)
		best = max(best, cs[lag])
	}
	if best <= 0 {
		return 0, 0
	}
	// A voiced frame correlates almost as well at two and three periods
	// as at one: the shortest lag that is a local maximum close to the
	// best is the period, not the best itself.
	for lag := pitchMinLag; lag <= pitchMaxLag; lag++ {
		if cs[lag] >= 0.9*best && cs[lag] >= cs[lag-1] && cs[lag] >= cs[lag+1] {
			return pitchRate / float64(lag), cs[lag]
		}
	}
	return 0, 0
}

func dot(a, b []float64) float64 {
	var s float64
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}
