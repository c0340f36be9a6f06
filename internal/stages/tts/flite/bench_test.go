//go:build cgo && !noflite

package flite

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/voiced/voiced/internal/stages/tts/speech"
)

// A typical first sentence of an answer, and a longer one.
var benchTexts = map[string]string{
	"first": "Your order shipped yesterday.",
	"long":  "You can return most items within thirty days of delivery, as long as they are unused and in their original packaging.",
}

// BenchmarkSynthesize reports the real-time factor (synthesis time over
// audio length) and the time to the first chunk, per voice and text; and
// cpu-rtf, the process's CPU time over audio length, which a busy shared
// machine does not inflate.
func BenchmarkSynthesize(b *testing.B) {
	e, err := New(Config{})
	if err != nil {
		b.Fatal(err)
	}
	for _, text := range []string{"first", "long"} {
		for _, v := range voiceNames {
			b.Run(text+"/"+v, func(b *testing.B) {
				var audio, first, elapsed time.Duration
				cpu0 := cpuTime()
				for b.Loop() {
					res, err := e.Synthesize(context.Background(), speech.Request{Text: benchTexts[text], Voice: v, SampleRate: 16000}, func([]int16) {})
					if err != nil {
						b.Fatal(err)
					}
					audio += res.Audio()
					first += res.FirstChunk
					elapsed += res.Elapsed
				}
				b.ReportMetric(elapsed.Seconds()/audio.Seconds(), "rtf")
				b.ReportMetric((cpuTime()-cpu0).Seconds()/audio.Seconds(), "cpu-rtf")
				b.ReportMetric(float64(first.Microseconds())/1000/float64(b.N), "first-chunk-ms")
				b.ReportMetric(audio.Seconds()/float64(b.N), "audio-s/op")
			})
		}
	}
}

// cpuTime is the process's user and system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
