package llm

import (
	"cmp"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/pipeline"
	"github.com/voiced/voiced/internal/stages/llm/provider"
)

// The tests in this file run the chain's timing logic on synctest's fake
// clock with an in-memory provider (no network), so waits, limits and
// clamps are checked exactly.

// step is one scripted attempt of a fakeProvider.
type step struct {
	delay  time.Duration // before the first piece
	pieces []string
	gap    time.Duration // between pieces
	silent bool          // after the pieces, send nothing until cancelled
	err    *provider.Error
	finish string
	tokens int
	during func() // runs while the attempt is in flight (another instance acts)
}

type call struct {
	at        time.Time
	deadline  time.Time
	maxTokens int
}

type fakeProvider struct {
	name   string
	script []step

	mu    sync.Mutex
	calls []call
}

func (f *fakeProvider) Name() string  { return f.name }
func (f *fakeProvider) Model() string { return f.name + "-model" }

func (f *fakeProvider) Stream(ctx context.Context, req *provider.Request, onText func(string)) (provider.Result, error) {
	dl, _ := ctx.Deadline()
	f.mu.Lock()
	n := len(f.calls)
	f.calls = append(f.calls, call{at: time.Now(), deadline: dl, maxTokens: req.MaxOutputTokens})
	st := f.script[min(n, len(f.script)-1)]
	f.mu.Unlock()
	// The finish reason comes with the end of the answer, as the
	// adapters report it: a stream cut before has none.
	res := provider.Result{Provider: f.name, Model: f.Model(), OutputTokens: st.tokens}
	if st.during != nil {
		st.during()
	}
	sleep := func(d time.Duration) error {
		if d <= 0 {
			return nil
		}
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			return nil
		case <-ctx.Done():
			kind, cause := provider.ContextError(ctx, ctx.Err())
			return &provider.Error{Kind: kind, Provider: f.name, Model: f.Model(), Err: cause}
		}
	}
	if err := sleep(st.delay); err != nil {
		return res, err
	}
	for i, p := range st.pieces {
		if i > 0 {
			if err := sleep(st.gap); err != nil {
				return res, err
			}
		}
		onText(p)
	}
	if st.silent {
		return res, sleep(time.Hour)
	}
	if st.err != nil {
		e := *st.err
		e.Provider, e.Model = f.name, f.Model()
		return res, &e
	}
	res.FinishReason = cmp.Or(st.finish, provider.FinishStop)
	return res, nil
}

func (f *fakeProvider) Calls() []call {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]call(nil), f.calls...)
}

func timingConfig() Config {
	pc := ProviderConfig{Cap: 650 * time.Millisecond, TTFTLimit: 300 * time.Millisecond, StartTTFT: 200 * time.Millisecond, StartTPS: 50}
	return Config{OpenAI: pc, RetryBaseDelay: 40 * time.Millisecond, StallLimit: 200 * time.Millisecond}.withDefaults()
}

func fakeChain(t *testing.T, cfg Config, ps ...*fakeProvider) *Chain {
	t.Helper()
	var specs []spec
	for _, p := range ps {
		specs = append(specs, spec{p: p, cfg: cfg.OpenAI})
	}
	c, err := newChain(cfg, testTemplater{}, nil, nil, specs)
	require.NoError(t, err)
	return c
}

type result struct {
	gen     pipeline.Generation
	err     error
	text    string
	elapsed time.Duration
}

func gen(c *Chain, budget time.Duration) result {
	ctx, cancel := context.WithTimeout(context.Background(), budget)
	defer cancel()
	start := time.Now()
	var b strings.Builder
	g, err := c.Generate(ctx, helpReq, func(p string) { b.WriteString(p) })
	return result{gen: g, err: err, text: b.String(), elapsed: time.Since(start)}
}

var (
	rateLimited = func(wait time.Duration) *provider.Error {
		return &provider.Error{Kind: provider.KindRateLimit, Status: 429, RetryAfter: wait}
	}
	okStep = step{delay: 100 * time.Millisecond, pieces: []string{"Fine. ", "Done."}, gap: 20 * time.Millisecond, tokens: 4}
)

func TestRetryAfterHonouredWhenItFits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &fakeProvider{name: "a", script: []step{{err: rateLimited(150 * time.Millisecond)}, okStep}}
		r := gen(fakeChain(t, timingConfig(), p), 700*time.Millisecond)
		require.NoError(t, r.err)
		require.Equal(t, "Fine. Done.", r.text)
		calls := p.Calls()
		require.Len(t, calls, 2)
		require.Equal(t, 150*time.Millisecond, calls[1].at.Sub(calls[0].at))
		// The first attempt is shortened by the provider's 650ms cap; the
		// retry gets what is left of the one deadline, minus the reserve.
		require.Equal(t, calls[0].at.Add(650*time.Millisecond), calls[0].deadline)
		require.Equal(t, calls[0].at.Add(700*time.Millisecond-30*time.Millisecond), calls[1].deadline)
	})
}

func TestRetryAfterThatDoesNotFitIsNotSlept(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// 700ms budget - 30ms reserve - 400ms wait leaves 270ms, less than
		// the expected 200ms first token plus 8 tokens at 50/s (360ms).
		a := &fakeProvider{name: "a", script: []step{{err: rateLimited(400 * time.Millisecond)}}}
		b := &fakeProvider{name: "b", script: []step{okStep}}
		r := gen(fakeChain(t, timingConfig(), a, b), 700*time.Millisecond)
		require.NoError(t, r.err)
		require.Equal(t, "b", r.gen.Provider)
		require.Len(t, a.Calls(), 1)
		require.Equal(t, time.Duration(0), b.Calls()[0].at.Sub(a.Calls()[0].at), "fell back at once, no sleep")
	})
}

func TestBackoffWithoutServerWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &fakeProvider{name: "a", script: []step{{err: &provider.Error{Kind: provider.KindTransient, Status: 503}}, okStep}}
		r := gen(fakeChain(t, timingConfig(), p), 700*time.Millisecond)
		require.NoError(t, r.err)
		calls := p.Calls()
		gap := calls[1].at.Sub(calls[0].at)
		require.GreaterOrEqual(t, gap, 20*time.Millisecond) // base 40ms, jittered into [20ms, 40ms]
		require.LessOrEqual(t, gap, 40*time.Millisecond)
	})
}

func TestSilentProviderAbandonedAtTTFTLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := timingConfig()
		a := &fakeProvider{name: "a", script: []step{{silent: true}}}
		b := &fakeProvider{name: "b", script: []step{okStep}}
		r := gen(fakeChain(t, cfg, a, b), 1500*time.Millisecond)
		require.NoError(t, r.err)
		require.Equal(t, "b", r.gen.Provider)
		require.Equal(t, []string{ReasonProviderFallback}, r.gen.Degradation)
		require.Len(t, a.Calls(), 1, "a timeout is not retried on the same provider")
		require.Equal(t, cfg.OpenAI.TTFTLimit, b.Calls()[0].at.Sub(a.Calls()[0].at))
	})
}

func TestStallEndsStreamAtStallLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := timingConfig()
		a := &fakeProvider{name: "a", script: []step{{delay: 50 * time.Millisecond, pieces: []string{"Part one, "}, silent: true}}}
		r := gen(fakeChain(t, cfg, a), 1500*time.Millisecond)
		require.NoError(t, r.err)
		require.Equal(t, "Part one, ", r.text)
		require.Equal(t, []string{ReasonStreamInterrupted}, r.gen.Degradation)
		require.Equal(t, 50*time.Millisecond+cfg.StallLimit, r.elapsed)
	})
}

func TestSlowStreamStopsBeforeDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Pieces keep coming (no stall) but the answer would run past the
		// deadline: the attempt ends at deadline - reserve, keeping the text.
		cfg := timingConfig()
		cfg.OpenAI.Cap = 5 * time.Second
		pieces := strings.Split(strings.Repeat("word ", 100), " ")
		a := &fakeProvider{name: "a", script: []step{{delay: 100 * time.Millisecond, pieces: pieces, gap: 50 * time.Millisecond}}}
		r := gen(fakeChain(t, cfg, a), 700*time.Millisecond)
		require.NoError(t, r.err)
		require.Equal(t, []string{ReasonStreamInterrupted}, r.gen.Degradation)
		require.Equal(t, 700*time.Millisecond-cfg.Reserve, r.elapsed)
	})
}

func TestNoAttemptWithoutTimeForAFewTokens(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := &fakeProvider{name: "a", script: []step{okStep}}
		c := fakeChain(t, timingConfig(), a)
		r := gen(c, 300*time.Millisecond) // 270ms after the reserve < 360ms needed
		require.NoError(t, r.err)
		require.Empty(t, a.Calls())
		require.Equal(t, "extractive", r.gen.Provider)
		require.Equal(t, []string{ReasonExtractiveFallback}, r.gen.Degradation)
		require.Equal(t, time.Duration(0), r.elapsed)
	})
}

func TestLearningSizesMaxOutputTokens(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := timingConfig()
		cfg.LearnAlpha = 0.5
		// Real speed: 40ms to first token, then 9 tokens in 45ms (200/s).
		fast := step{delay: 40 * time.Millisecond, pieces: []string{"a ", "b ", "c ", "d ", "e ", "f ", "g ", "h ", "i ", "j."}, gap: 5 * time.Millisecond, tokens: 10}
		a := &fakeProvider{name: "a", script: []step{fast}}
		c := fakeChain(t, cfg, a)
		r := gen(c, 700*time.Millisecond)
		require.NoError(t, r.err)
		// First request: cap 650ms, start values 200ms and 50/s: (650-200)ms*50 = 22 tokens.
		require.Equal(t, 22, a.Calls()[0].maxTokens)
		for range 10 {
			gen(c, 700*time.Millisecond)
		}
		ttft, tps := c.slots[0].speed.get()
		require.InDelta(t, 40*time.Millisecond, ttft, float64(2*time.Millisecond))
		require.InDelta(t, 200, tps, 10)
		calls := a.Calls()
		// (650-40)ms at 200/s: about 122 tokens, below the 160 ceiling.
		require.InDelta(t, 122, calls[len(calls)-1].maxTokens, 5)
	})
}

func TestBreakerHalfOpenProbe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := timingConfig()
		cfg.BreakerFailures = 1
		cfg.BreakerOpen = 10 * time.Second
		cfg.MaxRetries = -1
		a := &fakeProvider{name: "a", script: []step{{err: &provider.Error{Kind: provider.KindTransient, Status: 500}}, okStep}}
		c := fakeChain(t, cfg, a)
		require.Equal(t, "extractive", gen(c, 700*time.Millisecond).gen.Provider)
		require.Equal(t, "extractive", gen(c, 700*time.Millisecond).gen.Provider)
		require.Len(t, a.Calls(), 1, "open breaker skips the provider")
		time.Sleep(cfg.BreakerOpen + time.Millisecond)
		require.Equal(t, "a", gen(c, 700*time.Millisecond).gen.Provider, "half-open lets one probe through")
		require.Len(t, a.Calls(), 2)
	})
}

func TestParentCancelDuringRetryWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &fakeProvider{name: "a", script: []step{{err: rateLimited(200 * time.Millisecond)}, okStep}}
		c := fakeChain(t, timingConfig(), p)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		time.AfterFunc(50*time.Millisecond, cancel)
		start := time.Now()
		_, err := c.Generate(ctx, helpReq, func(string) {})
		require.True(t, errors.Is(err, context.Canceled))
		require.Equal(t, 50*time.Millisecond, time.Since(start))
		require.Len(t, p.Calls(), 1)
	})
}

func TestRetryBudgetBucket(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newRetryBudget(0.1, 0.5, 2)
		require.True(t, b.withdraw())
		require.True(t, b.withdraw())
		require.False(t, b.withdraw(), "burst spent")
		for range 10 {
			b.deposit() // ten requests earn one retry
		}
		require.True(t, b.withdraw())
		require.False(t, b.withdraw())
		time.Sleep(2 * time.Second) // 0.5/s
		require.True(t, b.withdraw())
		require.False(t, b.withdraw())
		time.Sleep(time.Hour)
		require.True(t, b.withdraw())
		require.True(t, b.withdraw())
		require.False(t, b.withdraw(), "never more than the burst")
	})
}

func TestRetryBudgetRatioUnderOutage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// 1000 requests over 10s, all wanting a retry: about 10% + 0.5/s + burst.
		b := newRetryBudget(0.1, 0.5, 10)
		retries := 0
		for range 1000 {
			b.deposit()
			if b.withdraw() {
				retries++
			}
			time.Sleep(10 * time.Millisecond)
		}
		require.InDelta(t, 100+5+10, retries, 3)
	})
}

func TestOutputTokensLeaveTimeToSpeak(t *testing.T) {
	perChar := func(d time.Duration) func(int) time.Duration {
		return func(chars int) time.Duration { return time.Duration(chars) * d }
	}
	tests := []struct {
		name   string
		budget time.Duration
		synth  func(int) time.Duration
		want   int
	}{
		// 200 ms to first token, 100 tokens/s: 800 ms buy 80 tokens.
		{"text only", time.Second, nil, 80},
		// A fast synthesiser (0.5 ms a character, flite's order) costs only
		// the last sentence: 100 chars = 50 ms, so 75 tokens.
		{"fast synthesiser", time.Second, perChar(500 * time.Microsecond), 75},
		// A slow synthesiser (4 ms a character) binds on the last sentence
		// (400 ms) while the answer is short: 200+10n+400 <= 1000 ms.
		{"slow synthesiser, short answer", time.Second, perChar(4 * time.Millisecond), 40},
		// With more time it binds on the whole answer (62.5 tokens/s spoken,
		// below the provider's 100): 200+16n <= 1320 ms.
		{"slow synthesiser, long answer", 1320 * time.Millisecond, perChar(4 * time.Millisecond), 70},
		// Never below the few tokens the attempt was judged worth making.
		{"thin budget", 250 * time.Millisecond, perChar(4 * time.Millisecond), 8},
		// Never above the ceiling.
		{"long budget", 10 * time.Second, perChar(500 * time.Microsecond), 160},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := outputTokens(tt.budget, 200*time.Millisecond, 100, tt.synth, 8, 160)
			require.Equal(t, tt.want, got)
		})
	}
}

func TestSpokenAnswerSizedForSynthesis(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := &fakeProvider{name: "a", script: []step{okStep}}
		c := fakeChain(t, timingConfig(), a)
		ctx, cancel := context.WithTimeout(context.Background(), 700*time.Millisecond)
		defer cancel()
		req := helpReq
		req.Synthesis = func(chars int) time.Duration { return time.Duration(chars) * 2 * time.Millisecond }
		_, err := c.Generate(ctx, req, func(string) {})
		require.NoError(t, err)
		// Cap 650 ms, 200 ms to first token, 50 tokens/s, 2 ms a
		// character: 16 tokens end at 520 ms and their last 64 characters
		// are spoken by 648 ms (the text alone: 22 tokens).
		require.Equal(t, 16, a.Calls()[0].maxTokens)
	})
}
