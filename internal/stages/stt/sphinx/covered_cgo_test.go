//go:build cgo && !nosphinx

package sphinx

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/audio/resample"
	"github.com/voiced/voiced/internal/pipeline"
)

// TestCovered: what a partial covers is the audio decoded when it was
// refreshed, in the input's samples: never more than was written, nothing
// during the first CMNWindow (gathered, not decoded), then growing by
// PartialEvery at each refresh, at 16 and at 8 kHz.
func TestCovered(t *testing.T) {
	e := engine(t)
	pcm, rate := synth(t, "flite-slt", "i want to return the table lamp i ordered on wednesday")
	for _, in := range []int{16000, 8000} {
		t.Run(fmt.Sprintf("%d Hz", in), func(t *testing.T) {
			audio := pcm
			if in != rate {
				rs, err := resample.New(rate, in)
				require.NoError(t, err)
				audio = rs.Flush(rs.Process(nil, pcm))
			}
			r, err := e.Start(t.Context(), in)
			require.NoError(t, err)
			defer r.Close()
			c := r.(pipeline.Coverer)
			every := int64(e.cfg.PartialEvery.Seconds() * float64(in))
			var written, last int64
			lastPartial, refreshes := "", 0
			for i := 0; i < len(audio); i += in / 50 {
				f := audio[i:min(i+in/50, len(audio))]
				p, err := r.Write(t.Context(), f)
				require.NoError(t, err)
				written += int64(len(f))
				got := c.Covered()
				require.LessOrEqual(t, got, written, "covers no more than written")
				require.GreaterOrEqual(t, got, last, "never shrinks")
				if written < int64(e.cfg.CMNWindow.Seconds()*float64(in)) {
					require.Zero(t, got, "nothing decoded while the cepstral mean's window gathers")
				}
				if got != last {
					refreshes++
					require.GreaterOrEqual(t, got-last, every-int64(in/25), "refreshed every PartialEvery (in 40 ms blocks)")
				} else {
					require.Equal(t, lastPartial, p, "the partial changes only with what it covers")
				}
				last, lastPartial = got, p
			}
			require.Greater(t, refreshes, 3)
			require.Greater(t, last, written-every-int64(in/10), "the newest partial is at most PartialEvery behind")
		})
	}
}
