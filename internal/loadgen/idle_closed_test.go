package loadgen

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/session"
	"github.com/voiced/voiced/internal/stages/sim"
	"github.com/voiced/voiced/internal/voicedtest"
)

// TestIdleSessionsClosedByTheServer: an idle run longer than the
// server's -idle-timeout has its sessions closed by the server long
// before the run ends. voiceload said nothing of it, and divided the
// memory of no sessions by the sessions it had opened: a "per idle
// session" figure of sessions that were gone.
func TestIdleSessionsClosedByTheServer(t *testing.T) {
	addr, _ := voicedtest.StartConfig(t, sim.Config{Seed: 17}, session.Config{IdleTimeout: 200 * time.Millisecond})
	cfg := Config{Addr: addr, Idle: true, Sessions: 3, Duration: time.Second, Seed: 17}
	rep, err := Run(testCtx(t), cfg)
	require.NoError(t, err)
	require.Equal(t, 3, rep.SessionsOpened)
	require.Equal(t, 3, rep.IdleClosedByServer)
	var table bytes.Buffer
	require.NoError(t, rep.WriteTable(&table))
	require.NotContains(t, table.String(), "KiB (peak", "a figure per idle session")
	require.Contains(t, table.String(), "3 idle sessions closed by the server")
}
