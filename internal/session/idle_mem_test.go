package session_test

import (
	"runtime"
	"strings"
	"testing"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/pipeline"
	"github.com/voiced/voiced/internal/session"
)

// TestIdleSessionMemory measures what an idle session costs the server:
// heap and goroutine stacks, per session, over 500 sessions. The figure
// for 5,000 sessions from the load tool is in docs/benchmarks.md; this
// keeps a regression from creeping in unnoticed.
func TestIdleSessionMemory(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("memory figures are not meaningful under -race or -short")
	}
	const n = 500
	h := newHarness(t, &fakeStages{}, pipeline.Config{}, session.Config{})
	url := "ws" + strings.TrimPrefix(h.http.URL, "http")
	// The clients live in this process too, so the figure is an upper
	// bound: it includes each client connection's buffers.
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	conns := make([]*websocket.Conn, 0, n)
	for range n {
		c, _, err := websocket.Dial(h.ctx, url, nil)
		require.NoError(t, err)
		_, _, err = c.Read(h.ctx) // session.ready
		require.NoError(t, err)
		conns = append(conns, c)
	}
	require.Equal(t, n, h.srv.Sessions(), "every session was admitted before it sent session.ready")
	runtime.GC()
	runtime.ReadMemStats(&after)
	perSession := float64((after.HeapInuse+after.StackInuse)-(before.HeapInuse+before.StackInuse)) / n
	t.Logf("server + client per idle session: %.1f KiB (heap %.1f KiB, stacks %.1f KiB)", perSession/1024,
		float64(after.HeapInuse-before.HeapInuse)/n/1024, float64(after.StackInuse-before.StackInuse)/n/1024)
	for _, c := range conns {
		c.Close(websocket.StatusNormalClosure, "")
	}
}
