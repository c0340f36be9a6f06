package voicedtest

import (
	"bufio"
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// Metric reads the unlabelled metric name from the Prometheus endpoint of
// the server at addr (host:port); ok is false when it is not there.
func Metric(t testing.TB, ctx context.Context, addr, name string) (v float64, ok bool) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		t.Fatalf("metrics: %v", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("metrics: %v", err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if s, found := strings.CutPrefix(sc.Text(), name+" "); found {
			v, err := strconv.ParseFloat(s, 64)
			if err != nil {
				t.Fatalf("metric %s: %v", name, err)
			}
			return v, true
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("metrics: %v", err)
	}
	return 0, false
}
