package session_test

import (
	"runtime"
	"testing"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/pipeline"
	"github.com/voiced/voiced/internal/session"
)

// TestIdleSessionsPark: an idle session keeps no goroutine (on Linux,
// where sessions park), answers as soon as its client sends something,
// parks again, and ends when its client closes; the server's Close ends
// parked sessions and the parker (goleak checks the package).
func TestIdleSessionsPark(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("sessions park only on Linux")
	}
	const n = 20
	h := newHarness(t, &fakeStages{}, pipeline.Config{}, session.Config{})
	base := runtime.NumGoroutine()
	// Besides the sessions', the server's reaper and parker run.
	settled := func(sessions int) {
		t.Helper()
		for runtime.NumGoroutine() > base+2 || h.srv.Sessions() != sessions {
			require.NoError(t, h.ctx.Err(), "%d goroutines for %d idle sessions (%d before), %d sessions",
				runtime.NumGoroutine(), sessions, base, h.srv.Sessions())
			runtime.Gosched()
		}
	}
	clients := make([]*client, n)
	for i := range clients {
		clients[i] = h.dial()
	}
	settled(n) // parked right after session.ready
	for range 3 {
		for _, c := range clients {
			require.Empty(t, c.ping(), "a parked session answers at once, and nothing else")
		}
		settled(n) // parked again after each ping
	}
	for _, c := range clients[:n/2] {
		require.NoError(t, c.conn.Close(websocket.StatusNormalClosure, ""))
	}
	settled(n / 2) // a parked session sees its client go
	for _, c := range clients[n/2:] {
		require.Empty(t, c.ping())
	}
}
