//go:build cgo

package vad_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/audio/resample"
	"github.com/voiced/voiced/internal/stages/stt/sttest"
	"github.com/voiced/voiced/internal/vad"
)

// benchAudio returns 16-bit audio at rate of one kind: "speech" (flite
// speaking, pauses cut out, so every frame is speech), "noise" (white
// noise at -40 dBFS) or "stream" (utterances with 1.5 s gaps of noise at
// -50 dBFS between them, about what a server-turn stream carries).
func benchAudio(b *testing.B, kind string, rate int) []int16 {
	b.Helper()
	v, _ := sttest.VoiceByName("flite-slt")
	if !v.Available() && kind != "noise" {
		b.Skip("flite not installed")
	}
	r := rand.New(rand.NewPCG(1, 2))
	noise := func(n int, dbfs float64) []int16 {
		x := make([]int16, n)
		sd := 32768 * math.Pow(10, dbfs/20)
		for i := range x {
			x[i] = int16(max(-32768, min(32767, r.NormFloat64()*sd)))
		}
		return x
	}
	if kind == "noise" {
		return noise(rate*10, -40)
	}
	var x []int16
	for _, u := range sttest.Utterances()[:8] {
		pcm, srate, err := sttest.Synth(b.Context(), v, u.Text)
		require.NoError(b, err)
		rs, err := resample.New(srate, rate)
		require.NoError(b, err)
		pcm = rs.Flush(rs.Process(nil, pcm))
		if kind == "speech" {
			fl := vad.FrameLen(rate)
			for i := 0; i+fl <= len(pcm); i += fl { // keep the loud frames only
				var s float64
				for _, v := range pcm[i : i+fl] {
					s += float64(v) * float64(v)
				}
				if s/float64(fl) > 32768*32768*1e-4 {
					x = append(x, pcm[i:i+fl]...)
				}
			}
			continue
		}
		x = append(x, pcm...)
		x = append(x, noise(rate*3/2, -50)...)
	}
	return x
}

// BenchmarkDetector is the cost of one 20 ms frame through the detector
// the server uses (vad.New: the energy gate in front of WebRTC's GMM).
func BenchmarkDetector(b *testing.B) {
	for _, kind := range []string{"speech", "noise", "stream"} {
		for _, rate := range []int{8000, 16000} {
			b.Run(kind+"/"+map[int]string{8000: "8k", 16000: "16k"}[rate], func(b *testing.B) {
				x := benchAudio(b, kind, rate)
				d, err := vad.New(rate, vad.Options{})
				require.NoError(b, err)
				defer d.Close()
				fl := vad.FrameLen(rate)
				n := len(x) / fl * fl
				i := 0
				cpuPerOp(b, func() {
					if _, err := d.Process(x[i : i+fl]); err != nil {
						b.Fatal(err)
					}
					if i += fl; i == n {
						i = 0
					}
				})
			})
		}
	}
}

// BenchmarkEndpointer is the whole turn detector per 20 ms frame on a
// server-turn stream: framing, gate, GMM, turn logic and handing out the
// turn's audio.
func BenchmarkEndpointer(b *testing.B) {
	for _, rate := range []int{8000, 16000} {
		b.Run(map[int]string{8000: "8k", 16000: "16k"}[rate], func(b *testing.B) {
			x := benchAudio(b, "stream", rate)
			d, err := vad.New(rate, vad.Options{})
			require.NoError(b, err)
			e, err := vad.NewEndpointer(d, rate, vad.Config{})
			require.NoError(b, err)
			defer e.Close()
			fl := vad.FrameLen(rate)
			n := len(x) / fl * fl
			i := 0
			b.ReportAllocs()
			cpuPerOp(b, func() {
				if _, err := e.Write(x[i : i+fl]); err != nil {
					b.Fatal(err)
				}
				if i += fl; i == n {
					i = 0
				}
			})
		})
	}
}

// BenchmarkWebRTC is WebRTC's GMM alone on speech frames: its raw decision
// (what the gate asks) and WebRtcVad_Process (hangover included).
func BenchmarkWebRTC(b *testing.B) {
	for _, rate := range []int{8000, 16000} {
		for _, smoothed := range []bool{false, true} {
			name := map[bool]string{false: "raw", true: "process"}[smoothed]
			b.Run(name+"/"+map[int]string{8000: "8k", 16000: "16k"}[rate], func(b *testing.B) {
				x := benchAudio(b, "speech", rate)
				w, err := vad.NewWebRTC(rate, vad.ModeDefault)
				require.NoError(b, err)
				defer w.Close()
				w.Smoothed = smoothed
				fl := vad.FrameLen(rate)
				n := len(x) / fl * fl
				i := 0
				cpuPerOp(b, func() {
					if _, err := w.Process(x[i : i+fl]); err != nil {
						b.Fatal(err)
					}
					if i += fl; i == n {
						i = 0
					}
				})
			})
		}
	}
}
