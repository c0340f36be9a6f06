package session_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/pipeline"
	"github.com/voiced/voiced/internal/protocol"
	"github.com/voiced/voiced/internal/session"
)

// TestServerTurnStallEndsTurn: a server turn whose audio stops coming
// (the client stopped sending, or its link stalled) held its turn until
// -max-audio plus the budget had passed, and then ended with
// deadline_exceeded, the speech heard unanswered. It ends once no audio
// has come for the stall bound (silenceMs, at least 1 s) past the end of
// the audio received (played in real time from its arrival), where that
// audio ends, as if its silence had come, and is answered within its
// budget. Audio that comes later is the stream's, not the turn's: speech
// in it is a new turn.
func TestServerTurnStallEndsTurn(t *testing.T) {
	const budget = 2 * time.Second
	h := newHarness(t, &fakeStages{}, pipeline.Config{}, session.Config{MaxBudget: budget, MaxAudioPerRequest: 5 * time.Second,
		Detector: scripted(strings.Repeat("S", 200))})
	c := h.dial()
	s := c.serverTurns(`,"prefixMs":0,"silenceMs":100`)
	const audio, stall = 600 * time.Millisecond, time.Second
	for i, id := range []string{"t-1", "t-2"} {
		sending := time.Now()
		s.send(make([]int16, 16*20*30)) // 600 ms of speech at once, then nothing
		stalled := time.Now()
		started, stopped, term := turnOf(t, c, id)
		require.Equal(t, protocol.TypeResult, term.Type, "%s is answered: %s", id, term.Raw)
		require.NotNil(t, stopped, "%s: speech_stopped", id)
		require.Equal(t, int64(600*i), started.AudioStartMs, "%s: a new turn, where its speech started", id)
		require.Equal(t, int64(600*(i+1)), stopped.AudioEndMs, "%s ends where its audio stopped coming", id)
		require.Equal(t, stopped.AudioEndMs, stopped.DecidedMs, "%s: decided where its audio stopped coming", id)
		// Audio sent faster than real time is no stall while it lasts.
		require.GreaterOrEqual(t, time.Since(sending), audio+stall, "%s ended before the stall bound", id)
		require.Less(t, time.Since(stalled), audio+stall+budget, "%s: the stall bound plus the budget", id)
	}
}
