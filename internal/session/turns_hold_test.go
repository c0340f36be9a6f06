package session_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/pipeline"
	"github.com/voiced/voiced/internal/protocol"
	"github.com/voiced/voiced/internal/session"
)

// holdSpeech is "i want to return the" spoken, 500 ms of silence before
// it, and a recognizer whose partial is "i want" until it has heard the
// speech and 300 ms of the pause after it, then last (its newest partial
// covering what it heard, or with behind only the turn's first 20 ms).
// The client, having sent 400 ms of the pause, waits for that partial: the
// feeder hands a partial to the turn before sending it, so the turn has
// heard the words when the client sees them, however busy the machine,
// and before the reader reaches silenceMs.
type holdSpeech struct {
	lead, speech []int16
	fake         *fakeStages
}

func newHoldSpeech(t *testing.T, last string, behind bool) *holdSpeech {
	pcm, s, e := speechClip(t, "i want to return the")
	heardAll := int64(e-s) + 300*16 // the turn's audio starts within 100 ms of s
	return &holdSpeech{
		lead:   make([]int16, 500*16),
		speech: pcm[s:e],
		fake: &fakeStages{heard: func(written int64) (string, int64) {
			covered := written
			if behind {
				covered = min(written, 320)
			}
			if written < heardAll {
				return "i want", covered
			}
			return last, covered
		}},
	}
}

// say streams the speech and 400 ms of the pause, and reads up to the
// partial last.
func (hs *holdSpeech) say(t *testing.T, c *client, s *streamer, last string) []protocol.ServerMessage {
	s.send(hs.lead)
	s.send(hs.speech)
	s.send(silence(400))
	var msgs []protocol.ServerMessage
	for {
		m := c.next()
		msgs = append(msgs, m)
		var tr protocol.Transcript
		if m.Type == protocol.TypeTranscript && m.As(&tr) == nil && tr.Text == last {
			return msgs
		}
	}
}

func silence(ms int) []int16 { return make([]int16, ms*16) }

// holdConfig sends every changed partial at once: the test waits for one.
var holdConfig = pipeline.Config{PartialInterval: time.Nanosecond}

// TestServerTurnHold: real speech with an 800 ms pause (past silenceMs)
// after "the". The recognizer's partial says which words it heard and how
// far they reach into the turn's audio: unfinished words that reach the
// end of speech hold the turn, and the speech after the pause continues
// it; words behind the end of speech (a recogniser behind its audio),
// finished words, or holdMs 0 let the pause end the turn, as before.
func TestServerTurnHold(t *testing.T) {
	second, s2, e2 := speechClip(t, "table lamp i ordered on wednesday")
	for _, tt := range []struct {
		name   string
		holdMs string
		last   string
		behind bool
		turns  int
	}{
		{"unfinished words hold the turn", "", "i want to return the", false, 1},
		{"a partial behind the end of speech holds nothing", "", "i want to return the", true, 2},
		{"finished words end the turn at silenceMs", "", "i want to return", false, 2},
		{"holdMs 0: no hold", `,"holdMs":0`, "i want to return the", false, 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			hs := newHoldSpeech(t, tt.last, tt.behind)
			h := newHarness(t, hs.fake, holdConfig, session.Config{})
			c := h.dial()
			s := c.serverTurns(`,"prefixMs":0` + tt.holdMs)
			msgs := hs.say(t, c, s, tt.last)
			s.send(silence(400)) // an 800 ms pause
			s.send(second[s2:e2])
			s.send(silence(2000))
			last := []string{"t-1", "t-2"}[tt.turns-1]
			term, before := c.terminal(last)
			msgs = append(append(msgs, before...), term)
			msgs = append(msgs, c.ping()...) // every frame has been read
			var ids []string
			for _, m := range typesOf(msgs, protocol.TypeSpeechStarted) {
				ids = append(ids, m.RequestID)
			}
			require.Equal(t, []string{"t-1", "t-2"}[:tt.turns], ids)
			require.Len(t, typesOf(msgs, protocol.TypeSpeechStopped), tt.turns)
			held := float64(0)
			if tt.turns == 1 {
				held = 1
			}
			requireMetric(t, h, "voiced_turns_held_total", held)
			requireMetric(t, h, "voiced_turns_held_resumed_total", held)
		})
	}
}

// TestServerTurnHeldAndEnded: a pause longer than silenceMs plus holdMs
// ends the held turn at the hold's end, audioEndMs where its speech ended,
// and its budget whole from that decision.
func TestServerTurnHeldAndEnded(t *testing.T) {
	const last = "i want to return the"
	hs := newHoldSpeech(t, last, false)
	h := newHarness(t, hs.fake, holdConfig, session.Config{})
	c := h.dial()
	s := c.serverTurns(`,"prefixMs":0,"holdMs":300,"budgetMs":1500`)
	hs.say(t, c, s, last)
	s.send(silence(300)) // 700 ms: past silenceMs, within the hold
	require.Empty(t, typesOf(c.ping(), protocol.TypeSpeechStopped), "held 700 ms into the pause")
	s.send(silence(200)) // 900 ms: past silenceMs+holdMs
	msgs := c.ping()
	stops := typesOf(msgs, protocol.TypeSpeechStopped)
	require.Len(t, stops, 1)
	var stopped protocol.SpeechStopped
	require.NoError(t, stops[0].As(&stopped))
	end := int64(len(hs.lead)+len(hs.speech)) / 16
	require.InDelta(t, end, stopped.AudioEndMs, 150, "audioEndMs where speech ended")
	require.InDelta(t, 800, stopped.DecidedMs-stopped.AudioEndMs, 40, "decided silenceMs plus holdMs after it")
	// The fake stages answer at once: the result may have come before the pong.
	results := typesOf(msgs, protocol.TypeResult)
	if len(results) == 0 {
		term, _ := c.terminal("t-1")
		results = append(results, term)
	}
	require.Equal(t, int64(1500), resultOf(t, results[0]).Budget.EffectiveBudgetMs)
	requireMetric(t, h, "voiced_turns_held_total", 1)
	requireMetric(t, h, "voiced_turns_held_resumed_total", 0)
}

// TestServerTurnHeldAndStalled: a held turn whose audio stops coming is
// ended by its streaming timer where its speech ended (the endpointer had
// found that end, and silenceMs after it, before the hold), not where the
// audio stopped 700 ms into the pause; and it counts as held once the
// reader catches up with the stall.
func TestServerTurnHeldAndStalled(t *testing.T) {
	const last = "i want to return the"
	hs := newHoldSpeech(t, last, false)
	h := newHarness(t, hs.fake, holdConfig, session.Config{})
	c := h.dial()
	s := c.serverTurns(`,"prefixMs":0`)
	hs.say(t, c, s, last)
	s.send(silence(300)) // 700 ms: past silenceMs, within the hold
	require.Empty(t, typesOf(c.ping(), protocol.TypeSpeechStopped), "held 700 ms into the pause")
	// No more audio: the stall bound ends the turn.
	var msgs []protocol.ServerMessage
	for len(typesOf(msgs, protocol.TypeSpeechStopped)) == 0 {
		msgs = append(msgs, c.next())
	}
	var stopped protocol.SpeechStopped
	require.NoError(t, typesOf(msgs, protocol.TypeSpeechStopped)[0].As(&stopped))
	end := int64(len(hs.lead)+len(hs.speech)) / 16
	require.InDelta(t, end, stopped.AudioEndMs, 150, "audioEndMs where speech ended")
	require.InDelta(t, 700, stopped.DecidedMs-stopped.AudioEndMs, 40, "decided where its audio stopped, 700 ms into the pause")
	s.send(silence(20)) // the reader catches up with the stall
	c.ping()
	requireMetric(t, h, "voiced_turns_held_total", 1)
	requireMetric(t, h, "voiced_turns_held_resumed_total", 0)
}

// typesOf returns the messages of type typ.
func typesOf(msgs []protocol.ServerMessage, typ string) []protocol.ServerMessage {
	var out []protocol.ServerMessage
	for _, m := range msgs {
		if m.Type == typ {
			out = append(out, m)
		}
	}
	return out
}
