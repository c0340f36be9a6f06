package llm

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/stages/llm/provider"
)

// lateTailProvider streams its pieces gap apart with the finish reason,
// then holds the stream open (a late usage chunk, [DONE], message_stop,
// the close of a Gemini stream) until the attempt is cut.
type lateTailProvider struct {
	pieces []string
	gap    time.Duration
	tokens int
}

func (p *lateTailProvider) Name() string  { return "a" }
func (p *lateTailProvider) Model() string { return "a-model" }

func (p *lateTailProvider) Stream(ctx context.Context, _ *provider.Request, onText func(string)) (provider.Result, error) {
	res := provider.Result{Provider: "a", Model: "a-model", OutputTokens: p.tokens}
	for i, piece := range p.pieces {
		if i > 0 {
			time.Sleep(p.gap)
		}
		onText(piece)
	}
	res.FinishReason = provider.FinishStop
	<-ctx.Done()
	kind, cause := provider.ContextError(ctx, ctx.Err())
	return res, &provider.Error{Kind: kind, Provider: "a", Model: "a-model", Err: cause}
}

// TestLearnedSpeedIgnoresALateTail: the tokens per second are learned
// from the text's own time, first piece to last. A tail held back after
// the finish reason until the stall limit (the answer is complete, see
// TestLateTailAfterFinishIsComplete) is not generation time: counting it
// made the provider look several times slower than it streamed, so the
// chain sized its answers too short and could come to skip it for lack of
// time.
func TestLearnedSpeedIgnoresALateTail(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := timingConfig()
		cfg.LearnAlpha = 1 // the last sample is the learned speed
		// 11 tokens, 10 of them in the 20 ms after the first: 500/s.
		p := &lateTailProvider{pieces: []string{"Fine, ", "done."}, gap: 20 * time.Millisecond, tokens: 11}
		c, err := newChain(cfg, testTemplater{}, nil, nil, []spec{{p: p, cfg: cfg.OpenAI}})
		require.NoError(t, err)
		r := gen(c, 700*time.Millisecond)
		require.NoError(t, r.err)
		require.Empty(t, r.gen.Degradation)
		require.Equal(t, cfg.StallLimit+20*time.Millisecond, r.elapsed, "the stall limit ended the late tail")
		_, tps := c.slots[0].speed.get()
		require.InDelta(t, 500, tps, 1)
	})
}
