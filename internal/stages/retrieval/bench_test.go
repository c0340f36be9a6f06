package retrieval

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/domain"
)

// benchIndex indexes 1,000 generated articles plus the sample domain's own,
// and returns the sample domain's evaluation questions as queries: the
// written set and the short spoken one, whose queries often keep their
// common words (see Config.MinTerms).
func benchIndex(b *testing.B) (*Index, []string) {
	b.Helper()
	d, err := domain.Default()
	require.NoError(b, err)
	articles := append(generateArticles(b, 1000, 1), d.Articles...)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ix, err := Open(ctx, Config{}, articles)
	require.NoError(b, err)
	b.Cleanup(func() { ix.Close() })
	cases, err := d.RetrievalEval()
	require.NoError(b, err)
	spoken, err := d.RetrievalEvalFile(domain.SpokenRetrievalEvalFile)
	require.NoError(b, err)
	cases = append(cases, spoken...)
	var queries []string
	for _, c := range cases {
		queries = append(queries, c.Question)
	}
	return ix, queries
}

// BenchmarkRetrieve1000 measures top-3 queries on a 1,036-article index
// (some 6,000 passages); the target is p99 under 20 ms on the
// 2-core reference machine.
func BenchmarkRetrieve1000(b *testing.B) {
	ix, queries := benchIndex(b)
	b.Logf("%d passages", ix.Len())
	ctx := context.Background()
	durations := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		start := time.Now()
		if _, err := ix.Retrieve(ctx, queries[i%len(queries)], 3); err != nil {
			b.Fatal(err)
		}
		durations = append(durations, time.Since(start))
	}
	b.StopTimer()
	reportPercentiles(b, durations)
}

// BenchmarkRetrieve1000Parallel runs queries from as many goroutines as
// GOMAXPROCS, as concurrent sessions do.
func BenchmarkRetrieve1000Parallel(b *testing.B) {
	ix, queries := benchIndex(b)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for i := 0; pb.Next(); i++ {
			if _, err := ix.Retrieve(ctx, queries[i%len(queries)], 3); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkOpen1000 measures building the index of 1,000 articles at
// startup.
func BenchmarkOpen1000(b *testing.B) {
	articles := generateArticles(b, 1000, 1)
	ctx := context.Background()
	for b.Loop() {
		ix, err := Open(ctx, Config{}, articles)
		if err != nil {
			b.Fatal(err)
		}
		ix.Close()
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
