package loadgen

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestOpenWhileResumingIsNotCutOff: with -resume, the server closes the
// session (1012) after a replace turn's first request and the client is
// reconnecting when the turn opens its second request. The client
// refuses that request (not connected): nothing of it reached a server.
// It was counted as a request "cut off by the server closing its
// session", a violation (fleet-load.sh with a drain reported one).
func TestOpenWhileResumingIsNotCutOff(t *testing.T) {
	cfg := quick(addrOf(drainingServer(t, http.StatusServiceUnavailable)))
	cfg.MetricsURL, cfg.Resume = "off", true
	r, err := newRunner(cfg.withDefaults())
	require.NoError(t, err)
	ctx := testCtx(t)
	c := r.connect(ctx)
	require.NotNil(t, c)
	start := time.Now()

	a := c.open("r-1", kindReplace)
	require.NoError(t, c.send(ctx, a, r.utts[0], 0))
	// The server closes after the final frame; the client keeps trying
	// to resume (every try gets 503).
	require.Eventually(t, func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return !c.up
	}, 10*time.Second, 5*time.Millisecond)
	b := c.open("r-1", kindReplace)
	require.ErrorIs(t, c.send(ctx, b, r.utts[0], 0), errStopped)
	a.release()
	b.release()
	c.close() // the slot gives the session up

	rep := r.report(start, time.Now(), c.budget, c.budget, nil, false)
	t.Logf("started %d, server closed %d, resume %+v, violations %v", rep.Requests.Started, rep.Requests.ServerClosed, *rep.Resume, rep.Violations)
	require.Equal(t, 1, rep.Resume.LostNotResumed, "the first request, lost with a session not resumed")
	require.Equal(t, rep.Resume.LostNotResumed, rep.Requests.ServerClosed, "the second request was never sent: not cut off")
	require.Equal(t, 1, rep.Requests.Started)
}
