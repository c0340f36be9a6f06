package sphinx

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// magnitude is the amplitude of the frequency f (Hz) in pcm at 16 kHz
// (one DFT bin; the tone lengths below are whole periods).
func magnitude(pcm []int16, f float64) float64 {
	var re, im float64
	for n, v := range pcm {
		w := 2 * math.Pi * f * float64(n) / modelRate
		re += float64(v) * math.Cos(w)
		im -= float64(v) * math.Sin(w)
	}
	return 2 * math.Hypot(re, im) / float64(len(pcm))
}

func tone(f, amp float64, n int) []int16 {
	pcm := make([]int16, n)
	for i := range pcm {
		pcm[i] = int16(amp * math.Sin(2*math.Pi*f*float64(i)/modelRate))
	}
	return pcm
}

// The fold keeps the band and adds its mirror image about 4 kHz (8 kHz
// minus f at 16 kHz): a 1 kHz tone gains a 7 kHz image at the gain, and only audio
// that arrived at 8 kHz is folded.
func TestFolder(t *testing.T) {
	for _, tc := range []struct {
		name      string
		rate      int
		gain      float64
		wantImage float64 // the 7 kHz image's amplitude over the tone's
	}{
		{"8 kHz, default gain", 8000, DefaultNarrowbandFold, DefaultNarrowbandFold},
		{"8 kHz, gain 0.3", 8000, 0.3, 0.3},
		{"8 kHz, no fold", 8000, -1, 0},
		{"16 kHz: full band, never folded", 16000, DefaultNarrowbandFold, 0},
		{"11025 Hz: its band passes 4 kHz, never folded", 11025, DefaultNarrowbandFold, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pcm := tone(1000, 8000, 1600)
			f := newFolder(tc.rate, tc.gain)
			f.apply(pcm)
			require.InDelta(t, 8000, magnitude(pcm, 1000), 8, "the band itself is kept")
			require.InDelta(t, tc.wantImage*8000, magnitude(pcm, 7000), 8, "the mirror image")
		})
	}
}

// The alternation runs over the whole utterance: audio folded in pieces
// of any length, odd ones included, is folded as in one piece.
func TestFolderAcrossCalls(t *testing.T) {
	whole := tone(440, 12000, 3001)
	f := newFolder(8000, DefaultNarrowbandFold)
	f.apply(whole)

	pieces := tone(440, 12000, 3001)
	g := newFolder(8000, DefaultNarrowbandFold)
	for i, n := 0, 1; i < len(pieces); i, n = i+n, n+2 {
		g.apply(pieces[i:min(i+n, len(pieces))])
	}
	require.Equal(t, whole, pieces)
}

// Loud audio saturates instead of wrapping around.
func TestFolderClamps(t *testing.T) {
	pcm := []int16{30000, 30000, -30000, -30000}
	f := newFolder(8000, 0.5)
	f.apply(pcm)
	require.Equal(t, []int16{32767, 15000, -32768, -15000}, pcm)
}
