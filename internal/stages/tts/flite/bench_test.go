//go:build cgo && !noflite && linux

package flite

import (
	"context"
	"runtime"
	"slices"
	"sync"
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

// firstSentences are typical first sentences of answers (4 to 17 words).
var firstSentences = []string{
	"Sure.",
	"Your order shipped yesterday.",
	"You can return most items within thirty days.",
	"I can help you change the delivery address.",
	"Standard shipping costs four ninety-nine and is free on orders over fifty dollars.",
	"Our stores are open from nine to eight, Monday to Saturday.",
	"To reset your password, open the sign-in page and choose forgot password.",
	"Refunds go back to the original payment method within five to seven business days.",
}

// BenchmarkFirstChunk reports the time from the call to the first chunk
// of typical first sentences with slt at 16 kHz: p50, p95 and the worst,
// alone and with one synthesis per CPU running at once; and the CPU time
// of the synthesising thread to the first chunk (cpu-p50, cpu-p95), which
// other processes on a shared machine do not inflate.
func BenchmarkFirstChunk(b *testing.B) {
	e, err := New(Config{})
	if err != nil {
		b.Fatal(err)
	}
	for _, par := range []int{1, 2} {
		b.Run(map[int]string{1: "alone", 2: "two-at-once"}[par], func(b *testing.B) {
			var mu sync.Mutex
			var firsts, cpus []time.Duration
			for b.Loop() {
				var wg sync.WaitGroup
				for w := range par {
					wg.Go(func() {
						for i, text := range firstSentences {
							if i%par != w {
								continue
							}
							// Locked, so the cgo call and its callbacks run
							// on the thread whose CPU time is read.
							runtime.LockOSThread()
							cpu0, cpu1 := threadCPU(), time.Duration(0)
							res, err := e.Synthesize(context.Background(), speech.Request{Text: text, SampleRate: 16000}, func([]int16) {
								if cpu1 == 0 {
									cpu1 = threadCPU()
								}
							})
							runtime.UnlockOSThread()
							if err != nil {
								b.Error(err)
								return
							}
							mu.Lock()
							firsts = append(firsts, res.FirstChunk)
							cpus = append(cpus, cpu1-cpu0)
							mu.Unlock()
						}
					})
				}
				wg.Wait()
			}
			q := func(d []time.Duration, p float64) float64 {
				slices.Sort(d)
				return float64(d[int(p*float64(len(d)-1))].Microseconds()) / 1000
			}
			b.ReportMetric(q(firsts, 0.5), "p50-ms")
			b.ReportMetric(q(firsts, 0.95), "p95-ms")
			b.ReportMetric(q(firsts, 1), "max-ms")
			b.ReportMetric(q(cpus, 0.5), "cpu-p50-ms")
			b.ReportMetric(q(cpus, 0.95), "cpu-p95-ms")
		})
	}
}

// threadCPU is the calling thread's user and system CPU time.
func threadCPU() time.Duration {
	const rusageThread = 1 // RUSAGE_THREAD
	var ru syscall.Rusage
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
