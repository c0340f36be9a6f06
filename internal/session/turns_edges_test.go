package session_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/pipeline"
	"github.com/voiced/voiced/internal/protocol"
	"github.com/voiced/voiced/internal/session"
	"github.com/voiced/voiced/internal/vad"
	"github.com/voiced/voiced/internal/vad/vadtest"
)

// scripted makes every server-turn stream's detector answer from script
// (one character a 20 ms frame, 'S' speech), so turns start and stop
// where the test says, without acoustics.
func scripted(script string) func(rate int) (vad.Detector, error) {
	return func(rate int) (vad.Detector, error) { return vadtest.New(rate, script), nil }
}

// waitStage waits until the fake announces stage.
func waitStage(t *testing.T, h *harness, fake *fakeStages, stage string) {
	t.Helper()
	for {
		select {
		case s := <-fake.started:
			if s == stage {
				return
			}
		case <-h.ctx.Done():
			t.Fatalf("stage %s never started", stage)
		}
	}
}

// TestServerTurnIDNotAClientsID: a client may name its own requests
// "t-1" (any [A-Za-z0-9._:-] id is valid), and a request of it can still
// be in flight when the session switches to server turns ("Client-turn
// requests in flight when the mode changes finish as usual"). The server's
// first turn must not take that id: registering it failed, and the turn
// was refused with "unavailable: session closing" under the client's id,
// a second terminal message for the client's t-1, which then got its
// result as well.
func TestServerTurnIDNotAClientsID(t *testing.T) {
	release := make(chan struct{})
	fake := holding(1, release) // the client's t-1 waits in its LLM stage
	pcfg := pipeline.Config{}
	pcfg.LLM.Cap = 8 * time.Second
	// 20 frames of speech, then silence: one turn that starts and ends.
	h := newHarness(t, fake, pcfg, session.Config{MaxBudget: 8 * time.Second, Detector: scripted(strings.Repeat("S", 20))})
	c := h.dial()
	c.audio("t-1", 0, true, time.Now().Add(8*time.Second))
	waitStage(t, h, fake, pipeline.StageLLM)

	// Not c.serverTurns: t-1's events may come before the pong.
	c.sendText(`{"type":"session.update","turnDetection":{"mode":"server","interrupt":false}}`)
	s := &streamer{c: c, rate: 16000}
	s.send(make([]int16, 16*20*60)) // 1.2 s: the turn's speech and its silence
	msgs := c.ping()
	close(release)
	for done := false; !done; {
		m := c.next()
		msgs = append(msgs, m)
		done = m.RequestID == "t-1" && m.Type == protocol.TypeResult
	}
	msgs = append(msgs, c.ping()...)

	terminals := map[string][]string{}
	turn := ""
	for _, m := range msgs {
		if m.Type == protocol.TypeSpeechStarted {
			turn = m.RequestID
		}
		if protocol.Terminal(m.Type) {
			terminals[m.RequestID] = append(terminals[m.RequestID], string(m.Raw))
		}
	}
	require.Len(t, terminals["t-1"], 1, "the client's t-1 has exactly one terminal message: %v", terminals["t-1"])
	require.NotEmpty(t, turn, "the server's turn was accepted (speech_started)")
	require.NotEqual(t, "t-1", turn, "the server's turn took an id in flight")
	for turn != "" && len(terminals[turn]) == 0 {
		if m := c.next(); m.RequestID == turn && protocol.Terminal(m.Type) {
			terminals[turn] = append(terminals[turn], string(m.Raw))
		}
	}
}

// TestServerTurnAfterCutPauseInterrupts: "Speech that goes on becomes
// the next turn, which does not interrupt the cut one." Speech that
// starts after a pause is not speech going on: it is a new turn, and with
// interrupt on it ends the cut turn still being answered, as any turn
// does. The session remembered only that the last turn was cut, however
// long ago, so the caller could not interrupt its answer.
func TestServerTurnAfterCutPauseInterrupts(t *testing.T) {
	release := make(chan struct{})
	fake := holding(1, release) // t-1 (the cut turn) waits in its LLM stage
	pcfg := pipeline.Config{}
	pcfg.LLM.Cap = 8 * time.Second
	// With prefixMs 0 t-1's audio starts at frame 0 and reaches 1 s
	// (-max-audio) at frame 50: cut there, as its speech stops. Then 2 s
	// of silence, and a new question.
	script := strings.Repeat("S", 50) + strings.Repeat(".", 100) + strings.Repeat("S", 20)
	h := newHarness(t, fake, pcfg, session.Config{MaxBudget: 8 * time.Second, MaxAudioPerRequest: time.Second,
		Detector: scripted(script)})
	t.Cleanup(func() { close(release) })
	c := h.dial()
	s := c.serverTurns(`,"prefixMs":0`)
	s.send(make([]int16, 16*20*50))
	var before []protocol.ServerMessage
	for m := c.next(); m.Type != protocol.TypeSpeechStopped; m = c.next() {
		before = append(before, m)
	}
	waitStage(t, h, fake, pipeline.StageLLM) // t-1 is being answered
	s.send(make([]int16, 16*20*(100+20+40)))
	for m := c.next(); ; m = c.next() {
		before = append(before, m)
		if m.Type == protocol.TypeSpeechStarted && m.RequestID != "t-1" {
			break
		}
	}
	var term *protocol.ServerMessage
	for i := range before {
		if before[i].RequestID == "t-1" && protocol.Terminal(before[i].Type) {
			term = &before[i]
		}
	}
	require.NotNil(t, term, "t-1 still in flight when the caller spoke again after a 2 s pause")
	require.Equal(t, protocol.CodeInterrupted, errorOf(t, *term).Code)
}

// TestServerTurnAfterCutGoesOn: speech that goes on past the cut is the
// next turn and does not interrupt the cut one (the rule the fix above
// keeps).
func TestServerTurnAfterCutGoesOn(t *testing.T) {
	release := make(chan struct{})
	fake := holding(1, release)
	pcfg := pipeline.Config{}
	pcfg.LLM.Cap = 8 * time.Second
	h := newHarness(t, fake, pcfg, session.Config{MaxBudget: 8 * time.Second, MaxAudioPerRequest: time.Second,
		Detector: scripted(strings.Repeat("S", 70))})
	c := h.dial()
	s := c.serverTurns(`,"prefixMs":0`)
	s.send(make([]int16, 16*20*(70+40)))
	var msgs []protocol.ServerMessage
	for m := c.next(); m.RequestID != "t-2" || m.Type != protocol.TypeSpeechStopped; m = c.next() {
		msgs = append(msgs, m)
	}
	close(release)
	for m := c.next(); m.RequestID != "t-1" || !protocol.Terminal(m.Type); m = c.next() {
		msgs = append(msgs, m)
	}
	for _, m := range msgs {
		if m.RequestID == "t-1" {
			require.False(t, protocol.Terminal(m.Type), "t-1 ended before its answer: %s", m.Raw)
		}
	}
}
