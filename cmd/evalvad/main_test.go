package main

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/vad"
)

func TestSpeechBounds(t *testing.T) {
	x := make([]int16, streamRate) // 1 s: silence, 0.5 s of tone from 0.2 s, silence
	for i := streamRate / 5; i < streamRate*7/10; i++ {
		x[i] = int16(3000 * math.Sin(float64(i)/3))
	}
	start, end, rms := speechBounds(x)
	require.Equal(t, streamRate/5, start)
	require.Equal(t, streamRate*7/10, end)
	require.InDelta(t, 3000/math.Sqrt2, rms, 50)
}

// TestScore: a turn per utterance is a hit, a turn over none is false, a
// turn over two is merged, an utterance under none is missed; offsets
// and latencies are in ms at the stream rate.
func TestScore(t *testing.T) {
	o := options{rate: 1000} // 1 sample = 1 ms
	truths := []truth{
		{speechStart: 1000, speech: 2000},
		{speechStart: 3000, speech: 4000},
		{speechStart: 4500, speech: 5000},
		{speechStart: 7000, speech: 8000},
	}
	turns := []turn{
		{start: 1020, end: 1990, at: 2490}, // hit: 20 ms late, 10 ms early, decided 490 ms after
		{start: 2300, end: 2400, at: 2900}, // false
		{start: 3000, end: 4800, at: 5300}, // merges the 2nd and 3rd
	}
	var st turnStats
	st.score(o, "c", "v", turns, truths)
	require.Equal(t, 4, st.utts)
	require.Equal(t, 3, st.turns)
	require.Equal(t, 1, st.missed)
	require.Equal(t, 1, st.false_)
	require.Equal(t, 1, st.merged)
	require.Equal(t, []float64{20, 0, -1500}, st.startOff)
	require.Equal(t, []float64{-10, 800, -200}, st.endErr)
	require.Equal(t, []float64{490, 1300, 300}, st.endLat)
}

func TestClicksAreShortAndLoud(t *testing.T) {
	x := make([]float64, streamRate*10)
	n := addClicks(x, rand.New(rand.NewPCG(1, 1)))
	require.GreaterOrEqual(t, n, 3)
	loud := 0
	for _, v := range x {
		if math.Abs(v) > 32768*math.Pow(10, -40.0/20) {
			loud++
		}
	}
	// At most 10 ms each: far below the 200 ms a turn needs.
	require.LessOrEqual(t, loud, n*streamRate/100)
	require.Positive(t, loud)
}

func TestPct(t *testing.T) {
	x := []float64{5, 1, 4, 2, 3}
	require.Equal(t, 1.0, pct(x, 0))
	require.Equal(t, 3.0, pct(x, 50))
	require.Equal(t, 5.0, pct(x, 100))
	require.Zero(t, pct(nil, 50))
	require.Equal(t, vad.DefaultSilenceMs, 500, "the report's targets assume the default")
}
