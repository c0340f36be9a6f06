//go:build cgo

package vad

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// voiced returns seconds of a voiced-speech-like signal at rate: a 140 Hz
// buzz with harmonics up to 3.5 kHz falling off with frequency, amplitude
// amp (peak, roughly).
func voiced(rate int, seconds, amp float64) []int16 {
	n := int(float64(rate) * seconds)
	x := make([]int16, n)
	const f0 = 140.0
	for i := range x {
		var v float64
		for h := 1; float64(h)*f0 < 3500; h++ {
			v += math.Sin(2*math.Pi*f0*float64(h)*float64(i)/float64(rate)) / float64(h)
		}
		x[i] = int16(amp * v / 3)
	}
	return x
}

func whiteNoise(n int, dbfs float64, seed uint64) []int16 {
	r := rand.New(rand.NewPCG(seed, seed))
	sd := 32768 * math.Pow(10, dbfs/20)
	x := make([]int16, n)
	for i := range x {
		x[i] = int16(max(-32768, min(32767, r.NormFloat64()*sd)))
	}
	return x
}

// classify runs x through d in frames and returns the decisions.
func classify(t testing.TB, d Detector, rate int, x []int16) []bool {
	fl := FrameLen(rate)
	var out []bool
	for i := 0; i+fl <= len(x); i += fl {
		s, err := d.Process(x[i : i+fl])
		require.NoError(t, err)
		out = append(out, s)
	}
	return out
}

func count(b []bool) (n int) {
	for _, v := range b {
		if v {
			n++
		}
	}
	return n
}

func TestFrameLenMatchesWebRTC(t *testing.T) {
	for _, r := range Rates {
		require.True(t, validFrame(r, FrameLen(r)), "%d Hz", r)
		require.False(t, validFrame(r, FrameLen(r)+1))
	}
	require.False(t, validFrame(24000, 480), "24 kHz (OpenAI TTS) is not a WebRTC rate")
}

func TestWebRTC(t *testing.T) {
	for _, rate := range Rates {
		buzz, noise := voiced(rate, 1, 8000), whiteNoise(rate*3, -50, 1)
		for _, mode := range []Mode{ModeQuality, ModeAggressive, ModeVeryAggressive} {
			w, err := NewWebRTC(rate, mode)
			require.NoError(t, err)
			silence := count(classify(t, w, rate, make([]int16, rate)))
			require.Zero(t, silence, "%d Hz mode %d: digital silence", rate, mode)
			speech := count(classify(t, w, rate, buzz))
			require.GreaterOrEqual(t, speech, 45, "%d Hz mode %d: voiced signal, frames of 50", rate, mode)
			w.Reset()
			quiet := count(classify(t, w, rate, noise))
			require.LessOrEqual(t, quiet, 15, "%d Hz mode %d: white noise at -50 dBFS, frames of 150", rate, mode)
			w.Close()
			w.Close() // twice is fine
			_, err = w.Process(make([]int16, FrameLen(rate)))
			require.Error(t, err)
		}
	}
}

func TestWebRTCErrors(t *testing.T) {
	_, err := NewWebRTC(24000, ModeDefault)
	require.ErrorIs(t, err, ErrRate)
	_, err = NewWebRTC(16000, Mode(5))
	require.ErrorIs(t, err, ErrConfig)
	_, err = NewWebRTC(16000, Mode(-1))
	require.ErrorIs(t, err, ErrConfig)
	w, err := NewWebRTC(16000, ModeDefault)
	require.NoError(t, err)
	defer w.Close()
	for _, n := range []int{0, 100, 160, 480} {
		_, err = w.Process(make([]int16, n))
		require.ErrorIs(t, err, ErrFrame, "%d samples", n)
	}
	_, err = New(16000, Options{Engine: "silero"})
	require.ErrorIs(t, err, ErrUnavailable)
}

// TestRawHasNoHangover: after a burst of speech, WebRTC's own decision
// (Smoothed) stays "speech" for its hangover frames; the raw decision the
// endpointer uses drops at once.
func TestRawHasNoHangover(t *testing.T) {
	const rate = 16000
	x := append(voiced(rate, 1, 8000), make([]int16, rate/2)...)
	ends := map[bool]int{}
	for _, smoothed := range []bool{false, true} {
		w, err := NewWebRTC(rate, ModeQuality)
		require.NoError(t, err)
		w.Smoothed = smoothed
		d := classify(t, w, rate, x)
		w.Close()
		last := -1
		for i, s := range d {
			if s {
				last = i
			}
		}
		ends[smoothed] = last
	}
	// Frame 49 is the signal's last; the filters' state spills into 50.
	require.LessOrEqual(t, ends[false], 50, "raw: speech ends with the signal")
	require.GreaterOrEqual(t, ends[true]-ends[false], 5, "WebRTC's own decision holds on for its hangover")
}

func TestResetForgets(t *testing.T) {
	const rate = 8000
	x := append(whiteNoise(rate, -35, 3), voiced(rate, 0.5, 3000)...)
	w, err := NewWebRTC(rate, ModeDefault)
	require.NoError(t, err)
	defer w.Close()
	a := classify(t, w, rate, x)
	w.Reset()
	require.Equal(t, a, classify(t, w, rate, x))
}

func TestNewGated(t *testing.T) {
	d, err := New(16000, Options{})
	require.NoError(t, err)
	defer d.Close()
	g, ok := d.(*Gate)
	require.True(t, ok)
	// Syllables: 200 ms voiced, 100 ms of quiet noise, for 3 s.
	var x []int16
	for range 10 {
		x = append(x, voiced(16000, 0.2, 8000)...)
		x = append(x, whiteNoise(1600, -50, 5)...)
	}
	d1 := classify(t, d, 16000, x)
	var speech, quiet int
	for i, s := range d1 {
		if s && i%15 < 10 {
			speech++
		}
		if s && i%15 >= 11 { // the first quiet frame may carry the filters' tail
			quiet++
		}
	}
	require.GreaterOrEqual(t, speech, 85, "voiced frames found, of 100")
	require.Zero(t, quiet, "quiet frames flagged")
	skipped, _, n := g.Skipped()
	require.Equal(t, int64(150), n)
	require.GreaterOrEqual(t, skipped, int64(45), "quiet frames the gate decided alone, of 50")
}

// TestTurnAtStreamStart: a stream that opens on speech (no silence, or
// less than a frame of it) finds that utterance as a turn of its own.
// The gate once took the first frame for the noise floor: a steady voice
// from the first sample was gated out whole (voiceload's streams whose
// first utterance began within a frame of the start), and a few ms of
// silence before it split it.
func TestTurnAtStreamStart(t *testing.T) {
	const rate = 16000
	utt := voiced(rate, 1.5, 8000)
	for _, leadMs := range []int{0, 5, 10, 15, 19, 40} {
		det, err := New(rate, Options{})
		require.NoError(t, err)
		ep, err := NewEndpointer(det, rate, Config{})
		require.NoError(t, err)
		x := make([]int16, leadMs*rate/1000)
		for range 2 {
			x = append(x, utt...)
			x = append(x, make([]int16, rate)...) // 1 s of silence
		}
		evs, err := ep.Write(x)
		require.NoError(t, err)
		var turns []int64
		for _, ev := range evs {
			if ev.Kind == SpeechStarted {
				turns = append(turns, ev.Pos*1000/rate)
			}
		}
		require.Len(t, turns, 2, "lead %d ms: turns starting at %v ms", leadMs, turns)
		require.InDelta(t, leadMs, turns[0], FrameMs, "lead %d ms", leadMs)
		ep.Close()
	}
}

// TestTurnsWithDCOffset: a recording with a DC bias (a microphone or
// sound card's offset, here about -30 dBFS, as loud as the voice) finds
// the same turns as without it. The gate counted the offset as energy:
// the noise floor sat at the bias, and a voice less than 6 dB above it
// never reached the detector.
func TestTurnsWithDCOffset(t *testing.T) {
	const rate = 16000
	var x []int16
	for i := range 2 {
		x = append(x, whiteNoise(rate, -65, uint64(i+1))...)
		x = append(x, voiced(rate, 1, 3000)...)
	}
	x = append(x, whiteNoise(rate, -65, 9)...)
	for _, dc := range []int{0, 1000, -1000} {
		det, err := New(rate, Options{})
		require.NoError(t, err)
		ep, err := NewEndpointer(det, rate, Config{})
		require.NoError(t, err)
		y := make([]int16, len(x))
		for i, s := range x {
			y[i] = int16(max(-32768, min(32767, int(s)+dc)))
		}
		evs, err := ep.Write(y)
		require.NoError(t, err)
		var turns []int64
		for _, ev := range evs {
			if ev.Kind == SpeechStarted {
				turns = append(turns, ev.Pos*1000/rate)
			}
		}
		require.Len(t, turns, 2, "dc %d: turns starting at %v ms", dc, turns)
		require.InDelta(t, 1000, turns[0], 2*FrameMs, "dc %d", dc)
		require.InDelta(t, 3000, turns[1], 2*FrameMs, "dc %d", dc)
		ep.Close()
	}
}
