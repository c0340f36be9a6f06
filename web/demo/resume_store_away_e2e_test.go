package demo_test

import (
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/fleet/redistest"
)

// TestDemoResumedFalseKeepsHandedOverResult drops the page's connection
// while a turn is thinking and stops Redis before the page comes back:
// voiced accepts the resume without its history ("resumed": false, same
// conversation) and, as protocol.md documents, still hands the turn's
// result, decided after the resume on this instance, to the new session.
// The page must show it on the card that waited, not call the turn lost
// at session.ready and drop the result that follows.
func TestDemoResumedFalseKeepsHandedOverResult(t *testing.T) {
	if !redistest.Available() {
		t.Skip("redis-server not installed")
	}
	rd := redistest.Start(t)
	args := append(append([]string(nil), resumeArgs...), "-redis", rd.URL(), "-redis.budget=250ms")
	ctx, srv, tab, console := demoPage(t, true, args...)
	waitMetric(t, ctx, srv.url, "voiced_redis_up", 1)
	link := newCutter(t, srv.addr)
	openPTTPage(t, tab, link.url)
	before, err := chromedp.Run(tab, chromedp.Evaluate[string](`document.getElementById('conn').title`))
	require.NoError(t, err)

	talk(t, tab, 1) // its answer takes 1.5 s: it is decided after the resume
	waitFramesRead(t, ctx, tab, srv.url)
	link.cut()
	rd.Stop()
	link.mend()
	waitPage(t, tab, `document.getElementById('conn').dataset.state === 'open' && document.getElementById('conn').title !== `+jsString(before), "the page's next session")
	resumed, err := chromedp.Run(tab, chromedp.Evaluate[string](`document.getElementById('conn').dataset.resumed`))
	require.NoError(t, err)
	require.Equal(t, "false", resumed, "Redis is away: resumed false")

	first := waitTurn(t, tab, 1)
	require.Equal(t, "done", first.State, "turn 1 ended with %q", first.Code)
	require.NotEmpty(t, first.Answer)
	require.Empty(t, pageErrors(console()))
}

func jsString(s string) string {
	b := []byte{'\''}
	for _, r := range s {
		if r == '\'' || r == '\\' {
			b = append(b, '\\')
		}
		b = append(b, string(r)...)
	}
	return string(append(b, '\''))
}
