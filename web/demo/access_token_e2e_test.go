package demo_test

import (
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
)

// TestDemoSaysAccessTokenMissing opens the page of a server that needs a
// token without ?access_token=: the page must say that the server wants a
// token and how to give it, not that the connection was lost to a server
// unreachable or refusing (what it said, retrying for ever, since the
// browser hides the upgrade's 401). With the token it connects.
func TestDemoSaysAccessTokenMissing(t *testing.T) {
	_, srv, tab, console := demoPage(t, true, append([]string{"-auth-token", "s3cret"}, simArgs...)...)
	require.NoError(t, chromedp.Do(tab, chromedp.Navigate(srv.url)))
	banner, err := chromedp.Run(tab, chromedp.Poll[string](
		`(() => { const b = document.getElementById('banner'); return !b.hidden && b.dataset.kind === 'connection' && b.textContent; })()`,
		chromedp.WithPollingInterval(20*time.Millisecond), chromedp.WithPollingTimeout(0)))
	require.NoError(t, err)
	require.Contains(t, banner, "access token")
	require.Contains(t, banner, "?access_token=")
	require.NotContains(t, banner, "unreachable")
	require.NotContains(t, banner, "s3cret")

	require.NoError(t, chromedp.Do(tab,
		chromedp.Navigate(srv.url+"?access_token=s3cret"),
		chromedp.WaitVisible(`#conn[data-state="open"]`),
	))
	for _, m := range pageErrors(console()) {
		require.Contains(t, m, "WebSocket connection", "only the refused upgrade is an error: %s", m)
	}
}
