// Command evalretrieval measures retrieval on a domain's evaluation set
// (eval/retrieval.yaml: questions with the articles that answer them):
// recall@k, mean reciprocal rank, and query latency.
//
//	evalretrieval [-domain DIR] [-k 3] [-min 0.9] [-v]
//
// Without -domain it evaluates the embedded sample help-desk domain. It
// exits with status 1 when recall@k is below -min.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"time"

	"github.com/voiced/voiced/internal/domain"
	"github.com/voiced/voiced/internal/stages/retrieval"
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "evalretrieval:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("evalretrieval", flag.ContinueOnError)
	dir := fs.String("domain", "", "domain folder (default: the embedded help-desk sample)")
	k := fs.Int("k", 3, "passages retrieved per question")
	minRecall := fs.Float64("min", 0.9, "fail when recall@k is below this")
	verbose := fs.Bool("v", false, "list every question with its top passages")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *k < 1 {
		return fmt.Errorf("-k must be at least 1")
	}
	d, err := domain.LoadOrDefault(*dir)
	if err != nil {
		return err
	}
	cases, err := d.RetrievalEval()
	if err != nil {
		return err
	}
	start := time.Now()
	ix, err := retrieval.Open(ctx, retrieval.Config{}, d.Articles)
	if err != nil {
		return err
	}
	defer ix.Close()
	buildTime := time.Since(start)

	var (
		hits  int
		rr    float64
		lat   []time.Duration
		lines []string
	)
	for _, c := range cases {
		t0 := time.Now()
		ps, err := ix.Retrieve(ctx, c.Question, *k)
		if err != nil {
			return fmt.Errorf("question %q: %w", c.Question, err)
		}
		lat = append(lat, time.Since(t0))
		rank := 0
		for i, p := range ps {
			if slices.Contains(c.Expect, articleOf(p.ID)) {
				rank = i + 1
				break
			}
		}
		if rank > 0 {
			hits++
			rr += 1 / float64(rank)
		}
		if *verbose || rank == 0 {
			mark := "hit "
			if rank == 0 {
				mark = "MISS"
			}
			line := fmt.Sprintf("%s %q (want %v):", mark, c.Question, c.Expect)
			for _, p := range ps {
				line += fmt.Sprintf(" %s(%.1f)", p.ID, p.Score)
			}
			lines = append(lines, line)
		}
	}
	slices.Sort(lat)
	recall := float64(hits) / float64(len(cases))
	fmt.Fprintf(out, "domain %s: %d articles, %d passages, index built in %s\n", d.Name, len(d.Articles), ix.Len(), buildTime.Round(time.Millisecond))
	fmt.Fprintf(out, "questions: %d\n", len(cases))
	fmt.Fprintf(out, "recall@%d: %.3f (%d/%d)\n", *k, recall, hits, len(cases))
	fmt.Fprintf(out, "MRR@%d: %.3f\n", *k, rr/float64(len(cases)))
	fmt.Fprintf(out, "query latency: p50 %s, p99 %s, max %s\n", pct(lat, 0.5), pct(lat, 0.99), lat[len(lat)-1])
	for _, l := range lines {
		fmt.Fprintln(out, l)
	}
	if recall < *minRecall {
		return fmt.Errorf("recall@%d %.3f is below %.3f", *k, recall, *minRecall)
	}
	return nil
}

func pct(d []time.Duration, q float64) time.Duration {
	return d[int(q*float64(len(d)-1))]
}

// articleOf returns the article id of a passage id ("gift-cards#2").
func articleOf(passageID string) string {
	for i := len(passageID) - 1; i >= 0; i-- {
		if passageID[i] == '#' {
			return passageID[:i]
		}
	}
	return passageID
}
