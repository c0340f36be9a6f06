//go:build cgo && !nosphinx

package sphinx

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/stages/stt/sttest"
)

// longSpeech is about 26 s of flite's slt voice, in two parts (flite
// speaks a text at once).
var longSpeech = []string{
	"I would like to know where my order is, it was supposed to arrive last Tuesday and the tracking page still says it is being prepared. " +
		"Could you check the status and tell me when it will be shipped? " +
		"I also want to change the delivery address to my office on Main Street because I will not be at home next week.",
	"Can you tell me about your return policy for shoes that do not fit, and whether I need to pay for the return shipping.",
}

// synthLong returns longSpeech, spoken by flite's slt at 16 kHz, n times.
func synthLong(tb testing.TB, n int) []int16 {
	tb.Helper()
	v, _ := sttest.VoiceByName("flite-slt")
	if !v.Available() {
		tb.Skip("flite not installed")
	}
	var pcm []int16
	for _, text := range longSpeech {
		part, rate, err := sttest.Synth(tb.Context(), v, text)
		require.NoError(tb, err)
		require.Equal(tb, modelRate, rate)
		pcm = append(pcm, part...)
	}
	return slices.Repeat(pcm, n)
}

// An abandoned utterance (closed without Finish: its request cancelled,
// replaced, its client gone) searched with a second pass and longer than
// discardFrames is not ended -- that ran its whole final pass, for
// nobody -- but its decoder is replaced by a new one; a shorter one, or
// one searched without a second pass, is ended and its decoder reused.
// Either way the next utterance is transcribed exactly as on a fresh
// decoder.
func TestAbandonedUtteranceCleanedUp(t *testing.T) {
	skipWithoutModels(t)
	long, rate := synthLong(t, 1), modelRate
	require.Greater(t, len(long)/(modelRate/100), discardFrames+100, "the long speech is not long enough")
	next, nextRate := synth(t, "flite-slt", "can you check my order status please")
	for _, tc := range []struct {
		name     string
		search   string
		pcm      []int16
		replaced bool
	}{
		{"short", SearchFast, long[:3*modelRate], false},
		{"long", SearchFast, long, true},
		{"long without a second pass", SearchQuick, long, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
			defer cancel()
			reg := prometheus.NewRegistry()
			e, err := New(ctx, Config{Decoders: 1, Search: tc.search, MaxWait: testTimeout, CacheDir: cacheDir}, testCorpus(), quiet, reg)
			require.NoError(t, err)
			defer e.Close()
			want, _, err := stream(ctx, e, next, nextRate)
			require.NoError(t, err)
			requireNear(t, "can you check my order status please", want, 1)

			r, err := e.Start(ctx, rate)
			require.NoError(t, err)
			first := r.(*recognizer).d
			_, err = r.Write(ctx, tc.pcm)
			require.NoError(t, err)
			require.NoError(t, r.Close()) // abandoned

			r, err = e.Start(ctx, nextRate) // waits for the reset or the rebuild
			require.NoError(t, err)
			require.Equal(t, tc.replaced, first != r.(*recognizer).d, "decoder replaced")
			require.NoError(t, r.Close())
			require.Equal(t, map[bool]float64{true: 1}[tc.replaced], counter(t, reg, "voiced_stt_decoder_discards_total"))
			require.Zero(t, counter(t, reg, "voiced_stt_decoder_rebuilds_total"), "counted as a failed reset")

			got, _, err := stream(ctx, e, next, nextRate)
			require.NoError(t, err)
			require.Equal(t, want, got)
		})
	}
}

// counter returns the value of the counter name in reg.
func counter(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

// threadCPU is the calling thread's CPU time (CLOCK_THREAD_CPUTIME_ID):
// with the goroutine locked to its thread, the CPU its cgo calls take,
// whatever else the machine runs.
func threadCPU(b *testing.B) time.Duration {
	var ts syscall.Timespec
	const clockThreadCPUTime = 3
	if _, _, errno := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTime, uintptr(unsafe.Pointer(&ts)), 0); errno != 0 {
		b.Fatal(errno)
	}
	return time.Duration(ts.Nano())
}

// BenchmarkAbandonedUtterance is the CPU time (cpu-ms/op, median) of
// ending an utterance of 1 to 32 s of speech, its final pass: what a
// decoder's reset pays for an abandoned utterance without discardFrames.
// BenchmarkDecoderRebuild is the other side of the break-even. Run with
// -benchtime=5x: every iteration decodes its utterance first.
func BenchmarkAbandonedUtterance(b *testing.B) {
	skipBenchWithoutModels(b)
	speech := synthLong(b, 2)
	require.GreaterOrEqual(b, len(speech), 32*modelRate)
	for _, search := range []string{SearchFast, SearchFull, SearchQuick} {
		e, err := New(b.Context(), Config{Decoders: 1, Search: search, CacheDir: cacheDir}, testCorpus(), quiet, nil)
		require.NoError(b, err)
		d, err := e.pool.Acquire(b.Context())
		require.NoError(b, err)
		for _, secs := range []int{1, 2, 4, 8, 16, 32} {
			b.Run(fmt.Sprintf("%s/%ds", search, secs), func(b *testing.B) {
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				pcm := speech[:secs*modelRate]
				var cpu []time.Duration
				for b.Loop() {
					b.StopTimer()
					require.NoError(b, d.start(search, chanWide, false))
					d.estimateCMN(pcm[:modelRate])
					for i := 0; i < len(pcm); i += block {
						require.NoError(b, d.process(pcm[i:min(i+block, len(pcm))]))
					}
					b.StartTimer()
					c0 := threadCPU(b)
					err := d.endUtt()
					cpu = append(cpu, threadCPU(b)-c0)
					require.NoError(b, err)
				}
				b.ReportMetric(float64(median(cpu).Microseconds())/1000, "cpu-ms/op")
			})
		}
		e.pool.Release(d, true)
		require.NoError(b, e.Close())
	}
}

// BenchmarkDecoderRebuild is the CPU time of freeing a decoder and
// building another (as the engine's are: domain model interpolated).
func BenchmarkDecoderRebuild(b *testing.B) {
	skipBenchWithoutModels(b)
	e, err := New(b.Context(), Config{Decoders: 1, CacheDir: cacheDir}, testCorpus(), quiet, nil)
	require.NoError(b, err)
	defer e.Close()
	cfg := e.cfg
	prons, err := cfg.ReadPronunciations()
	require.NoError(b, err)
	spec := lmSpec{general: cfg.GeneralLM, domain: e.domain.Path, weight: cfg.DomainWeight}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var cpu []time.Duration
	for b.Loop() {
		c0 := threadCPU(b)
		d, err := newDecoder(cfg, spec, prons)
		require.NoError(b, err)
		d.free()
		cpu = append(cpu, threadCPU(b)-c0)
	}
	b.ReportMetric(float64(median(cpu).Microseconds())/1000, "cpu-ms/op")
}

func median(ds []time.Duration) time.Duration {
	ds = slices.Clone(ds)
	slices.Sort(ds)
	return ds[len(ds)/2]
}

func skipBenchWithoutModels(b *testing.B) {
	if _, err := os.Stat(DefaultModelDir); err != nil {
		b.Skip("pocketsphinx-en-us not installed")
	}
}
