package loadgen

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/stages/sim"
	"github.com/voiced/voiced/internal/vad"
	"github.com/voiced/voiced/internal/voicedtest"
)

// TestVoicedSimServerTurnsDrained: server-turn streams that a drain
// closes mid-run still have their turns matched to their utterances:
// each result's time from the end of speech is reported, and no
// utterance the close cut off counts as missed.
func TestVoicedSimServerTurnsDrained(t *testing.T) {
	if !vad.Available {
		t.Skip("no voice activity detector in this build")
	}
	addr, srv := voicedtest.StartServer(t, sim.Config{Seed: 16, FailShare: -1, SlowShare: -1})
	cfg := Config{
		Addr: addr, Sessions: 4, Duration: 8 * time.Second, Think: 900 * time.Millisecond,
		Synthetic: 600 * time.Millisecond, Seed: 16, Turns: TurnsServer, MaxErrorShare: 100,
	}
	drained := make(chan error, 1)
	timer := time.AfterFunc(4*time.Second, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		drained <- srv.Shutdown(ctx)
	})
	defer timer.Stop()
	rep, err := Run(testCtx(t), cfg)
	require.NoError(t, err)
	require.NoError(t, <-drained, "the drain ended by itself, within its time")
	results := rep.Requests.ByCode["result"]
	require.Positive(t, results)
	require.Equal(t, results, rep.SpeechEndToResult.Count, "every result timed from its utterance's end")
	require.Positive(t, rep.SpeechEndToStopped.Count)
	require.Zero(t, rep.UtterancesMissed+rep.UtterancesMerged+rep.FalseTurns,
		"missed %d, merged %d, false %d", rep.UtterancesMissed, rep.UtterancesMerged, rep.FalseTurns)
	require.Zero(t, rep.Invariants.Missing)
}
