package loadgen

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/stages/sim"
	"github.com/voiced/voiced/internal/vad"
	"github.com/voiced/voiced/internal/voicedtest"
)

// TestVoicedSimServerTurnsRedial: a server-turn session the server
// closes mid-run is opened again and streams on, as the client-turn
// slots re-dial; the slot streamed nothing for the rest of the run. The
// closed stream's turns are still matched, and the new stream's counted
// with the rest.
func TestVoicedSimServerTurnsRedial(t *testing.T) {
	if !vad.Available {
		t.Skip("no voice activity detector in this build")
	}
	proxy := voicedtest.NewProxy(t, voicedtest.Start(t, sim.Config{Seed: 18, FailShare: -1, SlowShare: -1}))
	cfg := Config{
		Addr: proxy.Addr, Sessions: 2, Duration: 7 * time.Second, Think: 900 * time.Millisecond,
		Synthetic: 600 * time.Millisecond, Seed: 18, Turns: TurnsServer, MaxErrorShare: 100, MetricsURL: "off",
	}
	cut := make(chan int, 1)
	timer := time.AfterFunc(3*time.Second, func() { cut <- proxy.Cut() })
	defer timer.Stop()
	rep, err := Run(testCtx(t), cfg)
	require.NoError(t, err)
	require.Equal(t, 3, <-cut, "the probe's connection and both sessions' were cut")
	require.Equal(t, 4, rep.SessionsOpened, "each slot opened a session again")
	require.Equal(t, 2, proxy.Open(), "and streamed on it")
	require.Positive(t, rep.Requests.ByCode["result"])
	require.Zero(t, rep.UtterancesMissed+rep.UtterancesMerged+rep.FalseTurns,
		"missed %d, merged %d, false %d", rep.UtterancesMissed, rep.UtterancesMerged, rep.FalseTurns)
	require.Zero(t, rep.Invariants.Missing)
	require.Zero(t, rep.Invariants.Late)
}
