package llm

import (
	"context"
	"testing"
	"time"

	"github.com/voiced/voiced/internal/stages/llm/extractive"
	"github.com/voiced/voiced/internal/stages/llm/llmtest"
	"github.com/voiced/voiced/internal/stages/llm/openai"
)

// BenchmarkChainOpenAIFake measures the chain's own overhead on the happy
// path: one Generate through the real OpenAI adapter against a local fake
// that streams three pieces at once. It reports the time to the first
// piece as ttfp-ns/op.
func BenchmarkChainOpenAIFake(b *testing.B) {
	srv := llmtest.NewServer("openai", nil, ok("openai"))
	defer srv.Close()
	p, err := openai.New(openai.Config{BaseURL: srv.URL + "/v1", Model: "m", APIKey: openaiKey, HTTPClient: llmtest.HTTPClient(b)})
	if err != nil {
		b.Fatal(err)
	}
	c, err := newChain(testConfig(), testTemplater{}, nil, nil, []spec{{p: p, cfg: testConfig().OpenAI}})
	if err != nil {
		b.Fatal(err)
	}
	var ttfp time.Duration
	b.ReportAllocs()
	for b.Loop() {
		ctx, cancel := context.WithTimeout(context.Background(), 700*time.Millisecond)
		start := time.Now()
		first := true
		gen, err := c.Generate(ctx, helpReq, func(string) {
			if first {
				ttfp += time.Since(start)
				first = false
			}
		})
		cancel()
		if err != nil || gen.Provider != "openai" {
			b.Fatalf("gen %+v err %v", gen, err)
		}
	}
	b.ReportMetric(float64(ttfp.Nanoseconds())/float64(b.N), "ttfp-ns/op")
}

// BenchmarkExtractive measures the embedded responder on a help-desk
// request with three passages.
func BenchmarkExtractive(b *testing.B) {
	r := extractive.New(extractive.Config{Templater: testTemplater{}})
	req := helpReq
	req.Passages = append(req.Passages, req.Passages[0], req.Passages[0])
	b.ReportAllocs()
	for b.Loop() {
		_, _ = r.Generate(context.Background(), req, func(string) {})
	}
}
