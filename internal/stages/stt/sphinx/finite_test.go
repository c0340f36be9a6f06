package sphinx

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestNonFiniteSettingsRefused: validate checked the ranges of the float
// settings with comparisons that NaN passes (NaN <= 0 and NaN >= 1 are
// both false), and left the others unchecked, so -stt.lm-weight NaN,
// -stt.narrowband-fold NaN, -stt.speaker-warp Inf and the like started an
// engine that decoded wrongly without a word.
func TestNonFiniteSettingsRefused(t *testing.T) {
	if err := (Config{}).withDefaults().validate(); err != nil {
		t.Skipf("the default configuration does not validate here: %v", err)
	}
	nan, inf := math.NaN(), math.Inf(1)
	for _, tt := range []struct {
		flag string
		cfg  Config
	}{
		{"-stt.lm-weight NaN", Config{DomainWeight: nan}},         // handed to the C interpolation as is
		{"-stt.narrowband-fold NaN", Config{NarrowbandFold: nan}}, // every 8 kHz sample becomes 0
		{"-stt.narrowband-fold Inf", Config{NarrowbandFold: inf}}, // gains +Inf and -Inf
		{"-stt.speaker-warp NaN", Config{SpeakerWarp: nan}},       // a front end warped by "NaN"
		{"-stt.speaker-warp Inf", Config{SpeakerWarp: inf}},
		{"-stt.warp-pitch NaN", Config{WarpPitch: nan}}, // hz >= NaN never holds: nobody is warped
	} {
		t.Run(tt.flag, func(t *testing.T) {
			require.Error(t, tt.cfg.withDefaults().validate(), "%s accepted silently", tt.flag)
		})
	}
}

// TestFoldNaNLeavesAudioAlone: a NaN fold (FoldNarrowband is also called
// by tools, outside Config) turned every sample of a call into 0; it now
// folds nothing.
func TestFoldNaNLeavesAudioAlone(t *testing.T) {
	pcm := []int16{1000, -2000, 3000, -4000, 5000, -6000}
	FoldNarrowband(pcm, math.NaN())
	require.Equal(t, []int16{1000, -2000, 3000, -4000, 5000, -6000}, pcm)
}
