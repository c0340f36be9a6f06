package llm

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
)

// TestAttemptDeadlineKeepsTheReserve: an attempt ends at the time left
// minus the reserve as it was measured, however long sizing the request
// took (the synthesiser's estimate, the evidence); the reserve stays for
// the extractive answer, which then comes within the deadline. The
// synthesiser here takes 4 ms per estimate, on synctest's clock.
func TestAttemptDeadlineKeepsTheReserve(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := timingConfig()
		cfg.OpenAI.Cap = 5 * time.Second
		cfg.OpenAI.TTFTLimit = 5 * time.Second
		a := &fakeProvider{name: "a", script: []step{{silent: true}}}
		c := fakeChain(t, cfg, a)
		ctx, cancel := context.WithTimeout(context.Background(), 700*time.Millisecond)
		defer cancel()
		deadline, _ := ctx.Deadline()
		req := helpReq
		req.Synthesis = func(chars int) time.Duration {
			time.Sleep(4 * time.Millisecond)
			return time.Duration(chars) * time.Millisecond
		}
		var b strings.Builder
		g, err := c.Generate(ctx, req, func(p string) { b.WriteString(p) })
		require.NoError(t, err)
		require.Equal(t, "extractive", g.Provider)
		require.Equal(t, extractiveText, b.String())
		calls := a.Calls()
		require.Len(t, calls, 1)
		require.Equal(t, deadline.Add(-cfg.Reserve), calls[0].deadline, "the attempt's deadline is the request's minus the reserve")
	})
}
