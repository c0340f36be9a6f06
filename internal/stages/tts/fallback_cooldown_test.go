package tts

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/stages/llm/provider"
)

// gatedPrimary fails each call with the error sent on its channel, once
// both calls are in flight.
type gatedPrimary struct {
	in   sync.WaitGroup
	errs chan error
}

func (g *gatedPrimary) Name() string     { return "remote" }
func (g *gatedPrimary) Voices() []string { return []string{"alloy"} }
func (g *gatedPrimary) Synthesize(ctx context.Context, req Request, emit func([]int16)) (Result, error) {
	g.in.Done()
	return Result{Engine: "remote"}, <-g.errs
}

// TestFallbackCooldownOnlyExtends: a 429 asking for 60 s, then a concurrent
// sentence's 5xx (a 10 s cooldown): the primary is skipped for the 429's
// minute, not cut short to 10 s by the later failure.
func TestFallbackCooldownOnlyExtends(t *testing.T) {
	m, err := newMetrics(prometheus.NewRegistry())
	require.NoError(t, err)
	p := &gatedPrimary{errs: make(chan error)}
	p.in.Add(2)
	f := newFallback(p, &fakeSynth{voices: []string{"slt"}}, 10*time.Second,
		func(context.Context, Result, error) {}, func(string, string, int) time.Duration { return 0 }, m)
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			_, _ = f.Synthesize(context.Background(), Request{Text: "Hello.", SampleRate: 16000}, func([]int16) {})
		})
	}
	p.in.Wait() // two sentences at the primary
	p.errs <- &provider.Error{Kind: provider.KindRateLimit, Status: 429, RetryAfter: time.Minute}
	require.Eventually(t, func() bool { return f.skipUntil.Load() != 0 }, 5*time.Second, time.Millisecond)
	p.errs <- &provider.Error{Kind: provider.KindTransient, Status: 503}
	wg.Wait()
	left := time.Until(time.Unix(0, f.skipUntil.Load()))
	require.Greater(t, left, 50*time.Second, "the 429's Retry-After was cut short to %v", left)
}
