package intent

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var benchTexts = []string{
	"where is my order",
	"i ordered something last week and it's still not here can you check on it please",
	"cancer my order please",
	"how long does delivery take",
	"what's the weather like in boston",
	"i forgot my pass word and the reset link doesn't work",
	"hi",
	"",
}

// BenchmarkClassify reports the latency distribution of single calls; the
// issue's target is p99 under 2 ms on the 2-core reference machine.
func BenchmarkClassify(b *testing.B) {
	c := sample(b)
	ctx := context.Background()
	durations := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		start := time.Now()
		if _, err := c.Classify(ctx, benchTexts[i%len(benchTexts)]); err != nil {
			b.Fatal(err)
		}
		durations = append(durations, time.Since(start))
	}
	b.StopTimer()
	reportPercentiles(b, durations)
}

// BenchmarkNew measures training at startup as the server trains,
// calibration included.
func BenchmarkNew(b *testing.B) {
	d, cfg, err := serverConfig()
	require.NoError(b, err)
	for b.Loop() {
		if _, err := New(b.Context(), d.Intents, cfg); err != nil {
			b.Fatal(err)
		}
	}
}

func reportPercentiles(b *testing.B, d []time.Duration) {
	if len(d) == 0 {
		return
	}
	slices.Sort(d)
	at := func(q float64) float64 { return float64(d[int(q*float64(len(d)-1))].Nanoseconds()) }
	b.ReportMetric(at(0.50), "p50-ns")
	b.ReportMetric(at(0.99), "p99-ns")
}

// BenchmarkClassifyParallel classifies from as many goroutines as
// GOMAXPROCS, as concurrent sessions do.
func BenchmarkClassifyParallel(b *testing.B) {
	c := sample(b)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for i := 0; pb.Next(); i++ {
			if _, err := c.Classify(ctx, benchTexts[i%len(benchTexts)]); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
