package llm

import (
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/voiced/voiced/internal/stages/llm/provider"
)

// TestConcurrentGenerate runs 40 overlapping requests through a chain
// whose breaker opens, rate limits and cost cap all come into play: under
// -race it finds shared state touched without its lock.
func TestConcurrentGenerate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := timingConfig()
		cfg.BreakerFailures = 2
		cfg.BreakerOpen = 100 * time.Millisecond
		cfg.Prices = Prices{"a-model": {Input: 1, Output: 1}}
		cfg.MaxCostPerDay = 0.00001
		a := &fakeProvider{name: "a", script: []step{{err: &provider.Error{Kind: provider.KindTransient, Status: 500}}, okStep, {err: rateLimited(50 * time.Millisecond)}, okStep}}
		b := &fakeProvider{name: "b", script: []step{okStep, {delay: 50 * time.Millisecond, pieces: []string{"x"}, silent: true}}}
		c := fakeChain(t, cfg, a, b)
		var wg sync.WaitGroup
		for i := range 40 {
			wg.Go(func() {
				time.Sleep(time.Duration(i) * 7 * time.Millisecond)
				gen(c, 700*time.Millisecond)
			})
		}
		wg.Wait()
	})
}

// TestHalfOpenOneProbe: once its cooldown is over, an open breaker lets
// exactly one of three simultaneous requests probe the provider, and a
// success closes it for the next.
func TestHalfOpenOneProbe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := timingConfig()
		cfg.BreakerFailures = 2
		cfg.BreakerOpen = time.Second
		cfg.MaxRetries = -1
		fail := step{err: &provider.Error{Kind: provider.KindTransient, Status: 500}}
		a := &fakeProvider{name: "a", script: []step{fail, fail, okStep}}
		c := fakeChain(t, cfg, a)
		gen(c, 700*time.Millisecond)
		gen(c, 700*time.Millisecond)
		gen(c, 700*time.Millisecond)
		if n := len(a.Calls()); n != 2 {
			t.Fatalf("calls %d", n)
		}
		time.Sleep(time.Second + time.Millisecond)
		var wg sync.WaitGroup
		provs := make([]string, 3)
		for i := range 3 {
			wg.Go(func() { provs[i] = gen(c, 700*time.Millisecond).gen.Provider })
		}
		wg.Wait()
		if n := len(a.Calls()); n != 3 {
			t.Fatalf("calls %d (providers %v): more than one probe", n, provs)
		}
		gen(c, 700*time.Millisecond)
		if n := len(a.Calls()); n != 4 {
			t.Fatalf("closed after success: calls %d", n)
		}
	})
}
