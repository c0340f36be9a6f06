package resample

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestFlushLength: a stream of n input samples resampled and flushed
// gives exactly the output samples at times before the stream's end,
// ceil(n*out/in) of them (output j is at input time j*in/out, as Reset
// aligns it): no sample more (an empty stream gives nothing) and none
// lost. Flush used to feed Delay() = k/2 zeros: one input sample too many
// for an even k (an extra output whenever n*out/in is whole, an empty
// stream included) and too few for an odd k upsampling (the last
// (out/in-1)/2 outputs never came out).
func TestFlushLength(t *testing.T) {
	for _, pr := range []struct{ in, out int }{
		{48000, 8000},  // TTS at 48 kHz to a telephone stream (k even)
		{44100, 16000}, // a 44.1 kHz client to the recogniser (k even)
		{8000, 48000},  // 8 kHz TTS to a 48 kHz client (k odd, l = 6)
		{16000, 48000},
		{11025, 16000},
		{16000, 8000}, // these two are right: the test is not too strict
		{8000, 16000},
	} {
		for _, n := range []int{0, 1, 160, 441, 4410, 48000} {
			t.Run(fmt.Sprintf("%d-%d/n=%d", pr.in, pr.out, n), func(t *testing.T) {
				r, err := New(pr.in, pr.out)
				require.NoError(t, err)
				want := (n*pr.out + pr.in - 1) / pr.in
				got := r.Flush(r.Process(nil, make([]int16, n)))
				require.Len(t, got, want, "k=%d l=%d m=%d", r.k, r.l, r.m)
			})
		}
	}
}
