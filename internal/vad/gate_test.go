package vad_test

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/vad"
	"github.com/voiced/voiced/internal/vad/vadtest"
)

// noiseFrames returns n frames of white noise at dbfs, 16 kHz.
func noiseFrames(n int, dbfs float64, seed uint64) []int16 {
	r := rand.New(rand.NewPCG(seed, 1))
	sd := 32768 * math.Pow(10, dbfs/20)
	x := make([]int16, n*vad.FrameLen(16000))
	for i := range x {
		x[i] = int16(max(-32768, min(32767, r.NormFloat64()*sd)))
	}
	return x
}

// passed runs x through a gate in front of a detector that answers from
// script (one character a frame it is asked about, as vadtest.Script:
// past its end, not speech), and returns what the gate let through to the
// detector or judged sure speech ('S') and what it decided alone was not
// speech ('.'), frame by frame. The detector's answers matter to the
// gate: until its window is full, frames the detector calls speech do not
// join the noise floor.
func passed(t *testing.T, c vad.GateConfig, x []int16, script string) (string, *vad.Gate) {
	t.Helper()
	det := vadtest.New(16000, script)
	g, err := vad.NewGate(det, 16000, c)
	require.NoError(t, err)
	fl := vad.FrameLen(16000)
	var b strings.Builder
	for i := 0; i+fl <= len(x); i += fl {
		before, _, _ := g.Skipped()
		_, err := g.Process(x[i : i+fl])
		require.NoError(t, err)
		after, _, _ := g.Skipped()
		b.WriteByte(map[bool]byte{true: '.', false: 'S'}[after > before])
	}
	return b.String(), g
}

func TestGate(t *testing.T) {
	cat := func(parts ...[]int16) []int16 {
		var x []int16
		for _, p := range parts {
			x = append(x, p...)
		}
		return x
	}
	t.Run("steady noise is gated after the first frame", func(t *testing.T) {
		got, g := passed(t, vad.GateConfig{}, noiseFrames(200, -40, 1), "")
		require.Equal(t, 1, strings.Count(got, "S"), got)
		skipped, _, n := g.Skipped()
		require.Equal(t, int64(199), skipped)
		require.Equal(t, int64(200), n)
		require.InDelta(t, -41, g.FloorDBFS(), 1.5)
	})
	t.Run("bursts above the floor pass", func(t *testing.T) {
		x := cat(noiseFrames(100, -40, 2), noiseFrames(10, -25, 3), noiseFrames(100, -40, 4))
		got, _ := passed(t, vad.GateConfig{}, x, "."+strings.Repeat("S", 10))
		require.Equal(t, strings.Repeat("S", 10), got[100:110])
		require.Equal(t, 1, strings.Count(got[:100]+got[110:], "S"), got)
	})
	t.Run("the floor follows louder noise within its window", func(t *testing.T) {
		x := cat(noiseFrames(100, -55, 5), noiseFrames(300, -35, 6))
		got, _ := passed(t, vad.GateConfig{}, x, "")
		// The louder noise passes until the quiet part leaves the 2 s
		// window (100 frames, give or take a 10-frame block) ...
		n := strings.Count(got[100:], "S")
		require.InDelta(t, 100, n, 12, got)
		// ... and is gated after that.
		require.NotContains(t, got[230:], "S")
	})
	t.Run("below the absolute minimum nothing passes", func(t *testing.T) {
		got, _ := passed(t, vad.GateConfig{}, noiseFrames(20, -70, 7), "")
		require.NotContains(t, got, "S")
	})
	t.Run("a negative margin turns the gate off", func(t *testing.T) {
		got, g := passed(t, vad.GateConfig{MarginDB: -1}, noiseFrames(50, -70, 8), "")
		require.Equal(t, strings.Repeat("S", 50), got)
		skipped, _, _ := g.Skipped()
		require.Zero(t, skipped)
	})
	t.Run("a stream that starts with speech keeps it", func(t *testing.T) {
		// Before the fix the first loud frame became the floor, and a
		// stream that opened on a steady voice lost it up to its first
		// pause (voiceload's synthetic tone: the whole utterance).
		x := cat(noiseFrames(75, -20, 10), noiseFrames(50, -55, 11), noiseFrames(75, -20, 12))
		script := strings.Repeat("S", 150) // asked about the loud frames only
		got, g := passed(t, vad.GateConfig{}, x, script)
		require.Equal(t, strings.Repeat("S", 75), got[:75], "the opening speech reaches the detector")
		// The pause is background (far below the speaker's level), not
		// speech, so it sets the floor.
		require.Equal(t, strings.Repeat(".", 50), got[75:125])
		require.Equal(t, strings.Repeat("S", 75), got[125:])
		require.InDelta(t, -56, g.FloorDBFS(), 1.5)
	})
	t.Run("after the window a steady sound the detector calls speech is the floor", func(t *testing.T) {
		got, _ := passed(t, vad.GateConfig{}, noiseFrames(200, -40, 13), strings.Repeat("S", 200))
		require.Equal(t, strings.Repeat("S", 101), got[:101], "the 2 s window, and the first frame after it")
		require.NotContains(t, got[102:], "S")
	})
	t.Run("reset forgets the floor", func(t *testing.T) {
		det := vadtest.New(16000, strings.Repeat("S", 100))
		g, err := vad.NewGate(det, 16000, vad.GateConfig{})
		require.NoError(t, err)
		x := noiseFrames(2, -40, 9)
		fl := vad.FrameLen(16000)
		_, _ = g.Process(x[:fl])
		g.Reset()
		s, err := g.Process(x[fl:])
		require.NoError(t, err)
		require.True(t, s, "no floor after Reset: the first frame passes")
	})
}

func TestGateConfig(t *testing.T) {
	det := vadtest.New(16000, "")
	for _, c := range []vad.GateConfig{{MarginDB: 31}, {MinDBFS: -97}, {MinDBFS: -19}, {WindowMs: 399}, {WindowMs: 10001}} {
		_, err := vad.NewGate(det, 16000, c)
		require.ErrorIs(t, err, vad.ErrConfig, "%+v", c)
	}
	g, err := vad.NewGate(det, 16000, vad.GateConfig{})
	require.NoError(t, err)
	_, err = g.Process(make([]int16, 100))
	require.ErrorIs(t, err, vad.ErrFrame)
}

// TestGateForeground: once a speaker has been heard at -20 dBFS, a voice
// 20 dB quieter is background; when the speaker's level has sunk to within
// the margin of it (at ForegroundDecayDBPerSec), it is let through.
func TestGateForeground(t *testing.T) {
	var x []int16
	for i := range 5 { // quiet room, then the speaker's bursts with pauses
		x = append(x, noiseFrames(10, -55, uint64(10+i))...)
		x = append(x, noiseFrames(10, -20, uint64(20+i))...)
	}
	for i := range 20 { // then only the quiet voice
		x = append(x, noiseFrames(10, -55, uint64(40+i))...)
		x = append(x, noiseFrames(10, -40, uint64(60+i))...)
	}
	const margin = 15.0
	// The detector calls the voices speech and the pauses not. It is
	// asked about the first pause frame (no floor yet), every voice frame
	// and each first pause frame of the quiet voice (above the floor
	// once the speaker's level has sunk): the script is in that order.
	script := "." + strings.Repeat("S", 10*5) + strings.Repeat(strings.Repeat("S", 10), 20)
	got, _ := passed(t, vad.GateConfig{ForegroundDB: margin}, x, script)
	require.Equal(t, 50, strings.Count(got[1:100], "S"), "the speaker passes")
	through := 100 + int((20-margin)/vad.ForegroundDecayDBPerSec*1000/vad.FrameMs)
	require.NotContains(t, got[100:through-20], "S", "the quiet voice is background while the speaker was recent")
	require.Contains(t, got[through+20:], "S", "the speaker's level sinks, the quiet voice gets through")

	off, _ := passed(t, vad.GateConfig{ForegroundDB: -1}, x, script)
	require.Equal(t, 100, strings.Count(off[100:300], "S"), "without the foreground test the quiet voice passes")
}

// counting says "no" to its first no calls, "speech" to the next yes
// calls and "no" after, and counts the calls.
type counting struct{ calls, no, yes int }

func (c *counting) Process([]int16) (bool, error) {
	c.calls++
	return c.calls > c.no && c.calls <= c.no+c.yes, nil
}
func (c *counting) Reset() {}
func (c *counting) Close() {}

// TestGateSureSpeech: inside a run of speech, frames as loud as the
// speaker and far above the floor are speech without the detector; the
// run itself must first come from the detector.
func TestGateSureSpeech(t *testing.T) {
	x := append(noiseFrames(10, -50, 50), noiseFrames(30, -20, 51)...)
	fl := vad.FrameLen(16000)
	for _, ask := range []bool{false, true} {
		det := &counting{no: 1, yes: 3} // the first quiet frame, then the loud ones
		g, err := vad.NewGate(det, 16000, vad.GateConfig{AskEveryFrame: ask})
		require.NoError(t, err)
		var got strings.Builder
		for i := 0; i < len(x); i += fl {
			s, err := g.Process(x[i : i+fl])
			require.NoError(t, err)
			got.WriteByte(map[bool]byte{true: 'S', false: '.'}[s])
		}
		_, sure, _ := g.Skipped()
		if ask {
			require.Equal(t, 31, det.calls, "every loud frame asked")
			require.Zero(t, sure)
			require.Equal(t, "SSS"+strings.Repeat(".", 27), got.String()[10:])
		} else {
			// The first frame (no floor yet) and the first three loud
			// frames are asked; the rest are sure.
			require.Equal(t, 4, det.calls)
			require.Equal(t, int64(27), sure)
			require.Equal(t, strings.Repeat("S", 30), got.String()[10:])
		}
	}
}
