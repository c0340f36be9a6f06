//go:build cgo && !nosphinx

package sphinx

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A caller who says nothing for a second or two before the first word
// (digital silence, or white noise at -55 dBFS) is heard as one who
// speaks at once: the warp of a high voice (slt) and the fold of 8 kHz
// speech sent at 16 kHz (kal) are decided the same, on the speech, and
// the transcript is the same (the pause is still decoded: no word is
// lost). Before, the estimates were made on the pause: after 1 s, slt
// was not warped and kal not folded, and kal was heard as nothing at all.
func TestPauseBeforeFirstWord(t *testing.T) {
	e := engine(t)
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	for _, tc := range []struct {
		voice        string
		warp, narrow bool
	}{{"flite-slt", true, false}, {"flite-kal", false, true}} {
		const text = "where is my order"
		speech, rate := synth(t, tc.voice, text)
		decode := func(pause time.Duration, noiseDB float64) (string, bool, bool) {
			n := int(pause.Seconds() * float64(rate))
			pcm := make([]int16, n, n+len(speech))
			if noiseDB != 0 {
				// Noise at the speech's rate: band-limited with it.
				rng := rand.New(rand.NewPCG(3, 4))
				for i := range pcm {
					pcm[i] = clamp16(float32(rng.NormFloat64() * 32768 * math.Pow(10, noiseDB/20)))
				}
			}
			pcm = upsample(t, append(pcm, speech...), rate) // sent at 16 kHz
			r, err := e.Start(ctx, modelRate)
			require.NoError(t, err)
			defer r.Close()
			for i := 0; i < len(pcm); i += modelRate / 50 {
				_, err := r.Write(ctx, pcm[i:min(i+modelRate/50, len(pcm))])
				require.NoError(t, err)
			}
			got, err := r.Finish(ctx)
			require.NoError(t, err)
			rec := r.(*recognizer)
			return got, rec.d.warp, rec.narrow
		}
		want, warp, narrow := decode(0, 0)
		require.Equal(t, tc.warp, warp, tc.voice)
		require.Equal(t, tc.narrow, narrow, tc.voice)
		requireNear(t, text, want, 1)
		for _, pause := range []time.Duration{time.Second, 2 * time.Second} {
			for _, noise := range []float64{0, -55} {
				t.Run(fmt.Sprintf("%s/%v/%gdB", tc.voice, pause, noise), func(t *testing.T) {
					got, w, nb := decode(pause, noise)
					require.Equal(t, tc.warp, w, "warp")
					require.Equal(t, tc.narrow, nb, "narrowband")
					require.Equal(t, want, got)
				})
			}
		}
	}
}
