package llm

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/pipeline"
	"github.com/voiced/voiced/internal/stages/llm/extractive"
	"github.com/voiced/voiced/internal/stages/llm/llmtest"
	"github.com/voiced/voiced/internal/stages/llm/provider"
)

// deadlineRecorder wraps a real adapter and records the deadline of every
// attempt's context.
type deadlineRecorder struct {
	provider.Provider
	mu   sync.Mutex
	seen []time.Time
}

func (d *deadlineRecorder) Stream(ctx context.Context, req *provider.Request, onText func(string)) (provider.Result, error) {
	dl, _ := ctx.Deadline()
	d.mu.Lock()
	d.seen = append(d.seen, dl)
	d.mu.Unlock()
	return d.Provider.Stream(ctx, req, onText)
}

func TestEveryAttemptSharesTheOneDeadline(t *testing.T) {
	cfg := testConfig()
	cfg.MaxRetries = 2
	f := newFixture(t, cfg,
		link{"openai", []llmtest.Reply{llmtest.OpenAIStatus(500, nil, "err", "server_error", nil)}},
		link{"backup", []llmtest.Reply{llmtest.Status(503, nil, "busy"), llmtest.Status(503, nil, "busy"), ok("backup")}})
	var recs []*deadlineRecorder
	for _, s := range f.chain.slots {
		r := &deadlineRecorder{Provider: s.p}
		s.p = r
		recs = append(recs, r)
	}
	o := f.generate(t, 2*time.Second)
	require.NoError(t, o.err)
	require.Equal(t, []string{"openai", "openai", "openai", "backup", "backup", "backup"}, f.journal.Names())
	var all []time.Time
	for _, r := range recs {
		all = append(all, r.seen...)
	}
	require.Len(t, all, 6)
	// The providers' caps are longer than the budget, so every attempt
	// gets exactly the request's deadline minus the reserve: one deadline,
	// never a fresh timeout per attempt.
	want := o.deadline.Add(-cfg.Reserve)
	for i, dl := range all {
		require.WithinDuration(t, want, dl, 5*time.Millisecond, "attempt %d", i)
		require.True(t, !dl.After(o.deadline), "attempt %d deadline after the request's", i)
	}
}

func TestCapShortensAttemptButNotPastDeadline(t *testing.T) {
	cfg := testConfig()
	cfg.OpenAI.Cap = 300 * time.Millisecond
	cfg.OpenAI.TTFTLimit = time.Second
	f := newFixture(t, cfg, link{"openai", []llmtest.Reply{llmtest.Stream(llmtest.OpenAIChunks("openai-model", "stop", "late."), llmtest.StreamOpts{FirstDelay: 5 * time.Second})}}, link{"backup", []llmtest.Reply{ok("backup")}})
	o := f.generate(t, 1500*time.Millisecond)
	require.NoError(t, o.err)
	require.Equal(t, []string{"openai", "backup"}, f.journal.Names())
	require.Equal(t, "backup", o.gen.Provider)
	took := f.servers["backup"].Requests()[0].At.Sub(o.start)
	require.GreaterOrEqual(t, took, 300*time.Millisecond)
	require.Less(t, took, 1200*time.Millisecond)
	require.Equal(t, 1.0, testutil.ToFloat64(f.chain.m.failures.WithLabelValues("openai", "openai-model", "timeout")))
}

func TestCancelMidStreamClosesUpstream(t *testing.T) {
	f := newFixture(t, testConfig(), link{"openai", []llmtest.Reply{llmtest.Stream(llmtest.OpenAIChunks("openai-model", "stop", "Open Settings, ", "never."), llmtest.StreamOpts{CutAfter: 2, Cut: llmtest.CutStall})}})
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	gctx, gcancel := context.WithCancel(ctx)
	var canceledAt time.Time
	gen, err := f.chain.Generate(gctx, helpReq, func(string) {
		canceledAt = time.Now()
		gcancel() // barge-in after the first piece
	})
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, "openai", gen.Provider)
	gone := f.servers["openai"].Requests()[0].WhenGone()
	require.Less(t, gone.Sub(canceledAt), 50*time.Millisecond, "upstream closed %v after cancel", gone.Sub(canceledAt))
	t.Logf("upstream saw the connection close %v after the cancel", gone.Sub(canceledAt))
	require.Equal(t, []string{"openai"}, f.journal.Names())
	// Our own cancellation does not count against the provider, nor as
	// an answer that failed.
	require.Equal(t, uint32(0), f.chain.slots[0].breaker.Counts().TotalFailures)
	require.Equal(t, 1.0, testutil.ToFloat64(f.chain.m.answers.WithLabelValues("openai", "cancelled")))
	require.Equal(t, 0.0, testutil.ToFloat64(f.chain.m.answers.WithLabelValues("openai", "error")))
}

func TestCancelBeforeTextReturnsPromptly(t *testing.T) {
	f := newFixture(t, testConfig(), link{"openai", []llmtest.Reply{llmtest.Stream(llmtest.OpenAIChunks("openai-model", "stop", "x."), llmtest.StreamOpts{FirstDelay: 5 * time.Second})}})
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	gctx, gcancel := context.WithCancel(ctx)
	time.AfterFunc(50*time.Millisecond, gcancel)
	emitted := false
	_, err := f.chain.Generate(gctx, helpReq, func(string) { emitted = true })
	require.ErrorIs(t, err, context.Canceled)
	require.False(t, emitted)
	require.Equal(t, uint32(0), f.chain.slots[0].breaker.Counts().TotalFailures)
}

func TestNoKeysIsExtractiveOnly(t *testing.T) {
	var cfg Config
	cfg.FromEnv(func(string) string { return "" })
	c, err := New(cfg, testTemplater{}, nil, nil)
	require.NoError(t, err)
	defer c.Close()
	require.Equal(t, []string{extractive.Name}, c.Providers())
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	var got string
	gen, err := c.Generate(ctx, helpReq, func(p string) { got += p })
	require.NoError(t, err)
	require.Equal(t, extractive.Name, gen.Provider)
	require.Empty(t, gen.Degradation, "extractive as the only link is not a degradation")
	require.Equal(t, extractiveText, got)
}

func TestNewFromEnvAndOrder(t *testing.T) {
	var cfg Config
	cfg.Order = "gemini, openai"
	cfg.FromEnv(func(k string) string {
		return map[string]string{"OPENAI_API_KEY": openaiKey, "GEMINI_API_KEY": geminiKey}[k]
	})
	c, err := New(cfg, testTemplater{}, nil, nil)
	require.NoError(t, err)
	defer c.Close()
	require.Equal(t, []string{"gemini/gemini-2.5-flash", "openai/gpt-4o-mini", extractive.Name}, c.Providers())

	for _, bad := range []string{"openai,mistral", "openai,openai"} {
		cfg.Order = bad
		_, err := New(cfg, nil, nil, nil)
		require.Error(t, err, bad)
	}
}

func TestBreakerOpensAndSkips(t *testing.T) {
	cfg := testConfig()
	cfg.BreakerFailures = 2
	cfg.MaxRetries = -1
	f := newFixture(t, cfg, link{"openai", []llmtest.Reply{llmtest.OpenAIStatus(500, nil, "err", "server_error", nil)}}, link{"backup", []llmtest.Reply{ok("backup")}})
	for range 3 {
		o := f.generate(t, time.Second)
		require.NoError(t, o.err)
		require.Equal(t, "backup", o.gen.Provider)
	}
	// Two failures opened the breaker: the third request went straight to the backup.
	require.Equal(t, []string{"openai", "backup", "openai", "backup", "backup"}, f.journal.Names())
	require.Equal(t, 2.0, testutil.ToFloat64(f.chain.m.breakerState.WithLabelValues("openai", "openai-model")))
	require.Equal(t, 1.0, testutil.ToFloat64(f.chain.m.skips.WithLabelValues("openai", "openai-model", "breaker_open")))
}

func TestBreakerIgnoresPolicyAndInvalid(t *testing.T) {
	cfg := testConfig()
	cfg.BreakerFailures = 1
	f := newFixture(t, cfg, link{"openai", []llmtest.Reply{
		llmtest.Stream(llmtest.OpenAIChunks("openai-model", "content_filter"), llmtest.StreamOpts{}),
		llmtest.OpenAIStatus(400, nil, "bad", "invalid_request_error", nil),
		ok("openai"),
	}})
	o := f.generate(t, time.Second)
	require.ErrorIs(t, o.err, pipeline.ErrPolicyBlocked)
	o = f.generate(t, time.Second)
	require.Equal(t, extractive.Name, o.gen.Provider)
	o = f.generate(t, time.Second)
	require.Equal(t, "openai", o.gen.Provider, "breaker must still be closed")
}

func TestRetryBudgetStopsRetryStorm(t *testing.T) {
	cfg := testConfig()
	cfg.RetryBurst = 2
	cfg.RetryRatio = 0.01
	cfg.RetryPerSecond = 0.001
	cfg.BreakerFailures = 100
	f := newFixture(t, cfg, link{"openai", []llmtest.Reply{llmtest.OpenAIStatus(503, nil, "busy", "server_error", nil)}})
	const requests = 6
	for range requests {
		o := f.generate(t, time.Second)
		require.NoError(t, o.err)
		require.Equal(t, extractive.Name, o.gen.Provider)
	}
	// 6 first attempts and only the 2 retries the budget held.
	require.Len(t, f.journal.Names(), requests+2)
	require.Equal(t, 4.0, testutil.ToFloat64(f.chain.m.retriesDenied.WithLabelValues("openai", "openai-model", "budget")))
}

func TestMaxOutputTokensFromBudget(t *testing.T) {
	cfg := testConfig()
	cfg.OpenAI.StartTTFT = 100 * time.Millisecond
	cfg.OpenAI.StartTPS = 50
	cfg.OpenAI.Cap = 10 * time.Second
	f := newFixture(t, cfg, link{"openai", []llmtest.Reply{ok("openai")}})
	f.generate(t, 530*time.Millisecond) // 500ms after the reserve, 400ms after the first token: 20 tokens
	mt := f.servers["openai"].Requests()[0].Body["max_tokens"]
	require.InDelta(t, 20, mt, 2)
	f.generate(t, 10*time.Second) // lots of time: the ceiling
	require.EqualValues(t, cfg.MaxOutputTokens, f.servers["openai"].Requests()[1].Body["max_tokens"])
}

func TestRequestCarriesPromptAndHistory(t *testing.T) {
	f := newFixture(t, testConfig(), link{"openai", []llmtest.Reply{ok("openai")}})
	f.generate(t, time.Second)
	msgs := f.servers["openai"].Requests()[0].Body["messages"].([]any)
	require.Len(t, msgs, 4) // system, history user, history assistant, user
	require.Equal(t, "system", msgs[0].(map[string]any)["role"])
	last := msgs[3].(map[string]any)["content"].(string)
	require.Contains(t, last, "how do I reset my password")
	require.Contains(t, last, "password_reset")
	require.Contains(t, last, "Click Reset password")
}

func TestWarmReusesTheConnection(t *testing.T) {
	f := newFixture(t, testConfig(), link{"openai", []llmtest.Reply{llmtest.Status(404, nil, "not found"), ok("openai")}})
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	f.chain.Warm(ctx)
	o := f.generate(t, time.Second)
	require.NoError(t, o.err)
	rq := f.servers["openai"].Requests()
	require.Len(t, rq, 2)
	require.Empty(t, rq[0].Header.Get("Authorization"), "warm-up carries no key")
	require.Equal(t, rq[0].RemoteAddr, rq[1].RemoteAddr, "the answer used the warmed connection")
}
