package vad_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/vad"
)

// withDC adds a constant offset to x, as a microphone or sound card with
// a DC bias records it.
func withDC(x []int16, dc int) []int16 {
	out := make([]int16, len(x))
	for i, s := range x {
		out[i] = int16(max(-32768, min(32767, int(s)+dc)))
	}
	return out
}

// TestGateIgnoresDCOffset: a constant offset carries no sound (the
// detector behind the gate filters it out), so it must not count as
// energy: the gate measured each frame's mean square, DC included, so a
// stream with a DC bias had its noise floor at the bias, and speech
// quieter than the bias plus the margin was gated out before the
// detector heard it.
func TestGateIgnoresDCOffset(t *testing.T) {
	for _, dc := range []int{0, 500, 2000, -3000} {
		x := append(append(noiseFrames(100, -65, 11), noiseFrames(10, -35, 12)...), noiseFrames(50, -65, 13)...)
		got, g := passed(t, vad.GateConfig{}, withDC(x, dc), "."+strings.Repeat("S", 10))
		require.Equal(t, strings.Repeat("S", 10), got[100:110], "dc %d: the burst reaches the detector", dc)
		require.LessOrEqual(t, strings.Count(got[:100]+got[110:], "S"), 1, "dc %d: %s", dc, got)
		require.InDelta(t, -66, g.FloorDBFS(), 2, "dc %d: the floor is the noise's, not the offset's", dc)
	}
}
