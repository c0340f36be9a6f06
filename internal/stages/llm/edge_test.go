package llm

import (
	"context"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/pipeline"
	"github.com/voiced/voiced/internal/stages/llm/llmtest"
	"github.com/voiced/voiced/internal/stages/llm/provider"
)

// TestWhitespaceIsNoAnswer: a provider that streams only a newline and
// then fails has said nothing to the caller: the chain goes on to the
// next provider rather than keep the newline as a (stream_interrupted)
// answer.
func TestWhitespaceIsNoAnswer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := timingConfig()
		cfg.MaxRetries = -1
		a := &fakeProvider{name: "a", script: []step{{delay: 50 * time.Millisecond, pieces: []string{"\n", " "},
			err: &provider.Error{Kind: provider.KindTransient, Status: 500}}}}
		b := &fakeProvider{name: "b", script: []step{okStep}}
		r := gen(fakeChain(t, cfg, a, b), 1500*time.Millisecond)
		require.NoError(t, r.err)
		require.Equal(t, "b", r.gen.Provider)
	})
}

// TestHugeRetryAfter: a wait too large for a Duration (or NaN) is not
// read as a negative one, which started no cooldown: a 429 asking for it
// cools the provider down.
func TestHugeRetryAfter(t *testing.T) {
	for _, v := range []string{"99999999999", "1e300", "Inf", "NaN", "-5"} {
		got := provider.RetryAfter(http.Header{"Retry-After": {v}}, time.Now())
		require.GreaterOrEqual(t, got, time.Duration(0), v)
		require.LessOrEqual(t, got, provider.MaxRetryAfter, v)
		got = provider.RetryAfter(http.Header{"Retry-After-Ms": {v}}, time.Now())
		require.GreaterOrEqual(t, got, time.Duration(0), "ms "+v)
	}
	f := newFixture(t, testConfig(),
		link{"openai", []llmtest.Reply{llmtest.OpenAIStatus(429, map[string]string{"retry-after": "99999999999"}, "Rate limit reached", "requests", "rate_limit_exceeded"), ok("openai")}},
		link{"backup", []llmtest.Reply{ok("backup")}})
	o := f.generate(t, 1500*time.Millisecond)
	require.Equal(t, "backup", o.gen.Provider)
	require.True(t, f.chain.cooling(f.chain.slots[0]), "a 429 with a wait starts a cooldown")
}

// TestStartedBeforeTheFirstPiece: the chain says which provider answers,
// with the evidence it gave it, before that provider's first piece goes
// out (after a failed first provider: the second), so that an answer cut
// at its deadline keeps them (pipeline.GenerateRequest.Started).
func TestStartedBeforeTheFirstPiece(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := timingConfig()
		cfg.MaxRetries = -1
		a := &fakeProvider{name: "a", script: []step{{err: &provider.Error{Kind: provider.KindTransient, Status: 500}}}}
		b := &fakeProvider{name: "b", script: []step{okStep}}
		c := fakeChain(t, cfg, a, b)
		ctx, cancel := context.WithTimeout(t.Context(), 1500*time.Millisecond)
		defer cancel()
		var events []string
		req := helpReq
		req.Started = func(g pipeline.Generation) {
			events = append(events, "started "+g.Provider)
			require.Equal(t, c.evidence(req), g.Sources)
			require.Equal(t, []string{ReasonProviderFallback}, g.Degradation, "b answers for a")
		}
		g, err := c.Generate(ctx, req, func(p string) { events = append(events, "piece") })
		require.NoError(t, err)
		require.Equal(t, []string{"started b", "piece", "piece"}, events)
		require.Equal(t, g.Sources, c.evidence(req))
	})
}

// TestStartedForTheExtractiveFallback: when every provider is given up,
// the embedded responder announces itself with the chain's degradation.
func TestStartedForTheExtractiveFallback(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := timingConfig()
		cfg.MaxRetries = -1
		a := &fakeProvider{name: "a", script: []step{{err: &provider.Error{Kind: provider.KindTransient, Status: 500}}}}
		c := fakeChain(t, cfg, a)
		ctx, cancel := context.WithTimeout(t.Context(), 1500*time.Millisecond)
		defer cancel()
		var started []pipeline.Generation
		req := helpReq
		req.Started = func(g pipeline.Generation) { started = append(started, g) }
		g, err := c.Generate(ctx, req, func(string) {})
		require.NoError(t, err)
		require.Len(t, started, 1)
		require.Equal(t, g.Provider, started[0].Provider)
		require.Equal(t, g.Sources, started[0].Sources)
		require.Equal(t, []string{ReasonExtractiveFallback}, started[0].Degradation)
	})
}
