package loadgen

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestScrapeNotFoundSaysWhere: a voiced given tokens answers /metrics on
// its -addr with 404 (it serves it on the admin listener only), which the
// report showed as a bare "scrape: HTTP 404": the error says where the
// metrics are and which flag points there.
func TestScrapeNotFoundSaysWhere(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s := newScraper(srv.URL + "/metrics")
	require.False(t, s.scrape(ctx))
	require.Contains(t, s.lastErr, "HTTP 404")
	require.Contains(t, s.lastErr, "-metrics-url")
	require.Contains(t, s.lastErr, "admin")
}
