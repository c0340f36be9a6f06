package session_test

import (
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/pipeline"
	"github.com/voiced/voiced/internal/protocol"
	"github.com/voiced/voiced/internal/session"
)

// TestForcedCloseGoingAway: a forced close (Server.Close) ends the
// requests in flight with unavailable and closes with 1001 going away
// (protocol.md, close codes), not with the drain's 1012: abort emptied
// the registry before the terminals went out, and the first of them found
// a draining session with nothing left and queued the 1012 close.
func TestForcedCloseGoingAway(t *testing.T) {
	fake := &fakeStages{started: make(chan string, 8), finish: blockUntilDone[string]}
	h := newHarness(t, fake, pipeline.Config{}, session.Config{})
	c := h.dial()
	c.audio("r1", 0, true, time.Now().Add(5*time.Second))
	c.audio("r2", 0, true, time.Now().Add(5*time.Second))
	require.Equal(t, pipeline.StageSTT, <-fake.started)
	require.Equal(t, pipeline.StageSTT, <-fake.started)
	closed := make(chan error, 1)
	go func() { closed <- h.srv.Close() }()
	got := map[string]protocol.Code{}
	var err error
	for {
		var b []byte
		_, b, err = c.conn.Read(h.ctx)
		if err != nil {
			break
		}
		m, derr := protocol.DecodeServer(b)
		require.NoError(t, derr)
		if protocol.Terminal(m.Type) {
			got[m.RequestID] = errorOf(t, m).Code
		}
	}
	require.Equal(t, map[string]protocol.Code{"r1": protocol.CodeUnavailable, "r2": protocol.CodeUnavailable}, got)
	require.Equal(t, websocket.StatusGoingAway, websocket.CloseStatus(err), "%v", err)
	require.NoError(t, <-closed)
}

// TestForcedCloseClientSilent: a forced close whose client answers no
// close handshake (it stopped reading, or its network is gone) still
// ends the session within the close grace. coder/websocket's CloseNow
// does not close a connection whose handshake has begun (it waits for it,
// up to 5 s), so such a session outlived the grace and Close reported
// ErrStuck: a stage that ignores cancellation, which none did, and the
// process exited without closing its engines.
func TestForcedCloseClientSilent(t *testing.T) {
	h := newHarness(t, &fakeStages{}, pipeline.Config{}, session.Config{MaxBudget: 30 * time.Second})
	c := h.dial()
	c.audio("r1", 0, false, time.Now().Add(30*time.Second)) // streaming
	c.ping()
	// From here the client reads nothing.
	require.NoError(t, h.srv.Close())
}
