//go:build cgo && !nosphinx

package sphinx

import (
	"context"
	"fmt"
	"testing"
	"time"

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
// resampler), so the transcripts are too; after a pause too (see
// TestNarrowbandDetectionAfterAPause: this one was heard as "how long and
// delivery date of").
func TestNarrowbandUpsampledFoldedAsAt8kHz(t *testing.T) {
	e := engine(t)
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	const text = "how long does delivery take"
	speech, rate := synth(t, "flite-kal", text)
	require.Equal(t, 8000, rate)
	for _, pause := range []int{0, rate / 2} {
		kal := append(make([]int16, pause), speech...)
		byRate := testutil.ToFloat64(e.narrowband.WithLabelValues("rate"))
		detected := testutil.ToFloat64(e.narrowband.WithLabelValues("detected"))

		at8, _, err := stream(ctx, e, kal, rate)
		require.NoError(t, err)
		at16, _, err := stream(ctx, e, upsample(t, kal, rate), modelRate)
		require.NoError(t, err)
		require.Equal(t, at8, at16, "pause of %d samples", pause)
		require.Equal(t, byRate+1, testutil.ToFloat64(e.narrowband.WithLabelValues("rate")))
		require.Equal(t, detected+1, testutil.ToFloat64(e.narrowband.WithLabelValues("detected")), "pause of %d samples", pause)
	}
	detected := testutil.ToFloat64(e.narrowband.WithLabelValues("detected"))

	// Wideband speech is left alone.
	slt, rate := synth(t, "flite-slt", text)
	_, _, err := stream(ctx, e, slt, rate)
	require.NoError(t, err)
	require.Equal(t, detected, testutil.ToFloat64(e.narrowband.WithLabelValues("detected")))
}

// A caller rarely speaks at the first sample: the window the band is
// measured on (the first second) then ends in the middle of a word, and
// the step from the word to the end of the window is a click whose
// spectrum reaches above 4.5 kHz. 8 kHz speech upsampled after a pause of
// a quarter or half a second measured 56-63 dB down, mostly not
// narrowband, and was heard as wideband audio; a DC offset (no sound at
// all) did the same from both ends of the window. Every voice keeps a
// 10 dB margin on its side of the threshold.
func TestNarrowbandDetectionAfterAPause(t *testing.T) {
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
	} {
		for _, text := range []string{"what are your opening hours", "i want to cancel my order please", "yes"} {
			pcm, rate := synth(t, tc.voice, text)
			pcm = upsample(t, pcm, rate)
			for _, pause := range []time.Duration{250 * time.Millisecond, 500 * time.Millisecond} {
				for _, dc := range []int{0, 1000} {
					t.Run(fmt.Sprintf("%s/%s/%v/dc%d", tc.voice, text, pause, dc), func(t *testing.T) {
						x := append(make([]int16, int(pause.Seconds()*modelRate)), pcm...)
						for i := range x {
							x[i] = clamp16(float32(int(x[i]) + dc))
						}
						start := x[:min(modelRate, len(x))]
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
		}
	}
	// An offset alone is silence too.
	silence := make([]int16, modelRate)
	for i := range silence {
		silence[i] = 300
	}
	_, ok := b.highBand(silence)
	require.False(t, ok, "a DC offset says nothing about the band")
}
