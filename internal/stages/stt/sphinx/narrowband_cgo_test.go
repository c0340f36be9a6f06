//go:build cgo && !nosphinx

package sphinx

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/audio/resample"
)

// upsample resamples pcm from rate to 16 kHz with voiced's resampler, as a
// client that upsampled its audio would have.
func upsample(t *testing.T, pcm []int16, rate int) []int16 {
	t.Helper()
	rs, err := resample.New(rate, modelRate)
	require.NoError(t, err)
	return rs.Flush(rs.Process(nil, pcm))
}

// Speech made at 8 kHz and upsampled is found narrowband; speech made at
// 16 kHz or more is not, for every voice at hand, with a margin of more
// than 10 dB each side of the threshold; silence is not judged.
func TestNarrowbandDetection(t *testing.T) {
	b, err := newBandSplitter()
	require.NoError(t, err)
	for _, tc := range []struct {
		voice  string
		narrow bool
	}{
		{"flite-kal", true},
		{"flite-slt", false},
		{"flite-awb", false},
		{"flite-rms", false},
		{"espeak-en-us", false},
		{"espeak-en-gb-rp", false},
	} {
		for _, text := range []string{"what are your opening hours", "i want to cancel my order please", "yes"} {
			t.Run(tc.voice+"/"+text, func(t *testing.T) {
				pcm, rate := synth(t, tc.voice, text)
				start := upsample(t, pcm, rate)[:min(modelRate, len(pcm)*modelRate/rate)]
				db, ok := b.highBand(start)
				require.True(t, ok)
				if tc.narrow {
					require.Less(t, db, -narrowbandBelowDB-10.0)
				} else {
					require.Greater(t, db, -narrowbandBelowDB+10.0)
				}
				require.Equal(t, tc.narrow, b.narrowband(start))
			})
		}
	}
	_, ok := b.highBand(make([]int16, modelRate))
	require.False(t, ok, "silence says nothing about the band")
	require.False(t, b.narrowband(make([]int16, modelRate)))
}

// 8 kHz speech a client upsampled to 16 kHz is found narrowband and folded
// as if it had been sent at 8 kHz: the samples are the same (the same
// resampler), so the transcripts are too.
func TestNarrowbandUpsampledFoldedAsAt8kHz(t *testing.T) {
	e := engine(t)
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	const text = "how long does delivery take"
	kal, rate := synth(t, "flite-kal", text)
	require.Equal(t, 8000, rate)
	byRate := testutil.ToFloat64(e.narrowband.WithLabelValues("rate"))
	detected := testutil.ToFloat64(e.narrowband.WithLabelValues("detected"))

	at8, _, err := stream(ctx, e, kal, rate)
	require.NoError(t, err)
	at16, _, err := stream(ctx, e, upsample(t, kal, rate), modelRate)
	require.NoError(t, err)
	require.Equal(t, at8, at16)
	require.Equal(t, byRate+1, testutil.ToFloat64(e.narrowband.WithLabelValues("rate")))
	require.Equal(t, detected+1, testutil.ToFloat64(e.narrowband.WithLabelValues("detected")))

	// Wideband speech is left alone.
	slt, rate := synth(t, "flite-slt", text)
	_, _, err = stream(ctx, e, slt, rate)
	require.NoError(t, err)
	require.Equal(t, detected+1, testutil.ToFloat64(e.narrowband.WithLabelValues("detected")))
}
