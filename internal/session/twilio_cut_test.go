package session_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/pipeline"
	"github.com/voiced/voiced/internal/session"
	"github.com/voiced/voiced/internal/twilio"
)

// TestTwilioSpeechGoingOnAfterCutKeepsItsAnswer: a turn cut at
// -max-audio while the caller goes on speaking is answered, and the
// speech going on is the next turn, which does not interrupt it (docs:
// "Long turns"). On a call that next turn's start still sent clear,
// which dropped whatever of the cut turn's answer Twilio held: the caller
// heard the answer with its start missing, or not at all.
func TestTwilioSpeechGoingOnAfterCutKeepsItsAnswer(t *testing.T) {
	syn := flite(t)
	// 20 ms frames: t-1 starts at frame 0 and is cut at 1 s (frame 50);
	// the speech goes on to frame 80, t-2, and then stops.
	h := newHarness(t, &fakeStages{}, pipeline.Config{TTS: deadlineStage(roomy-time.Second, 0)},
		session.Config{Speech: syn, MaxBudget: roomy, Greeting: "-", MaxAudioPerRequest: time.Second,
			Detector: scripted(strings.Repeat("S", 80))})
	tw := dialTwilio(t, h, "")
	tw.setAutoEcho(false) // t-1's answer has not played when t-2 starts
	tw.start(nil)
	frame := make([]int16, 160)
	chunk := 0
	for range 50 {
		tw.speak(frame, &chunk)
	}
	m := tw.next()
	require.Equal(t, twilio.EventMark, m.Event, "%+v", m)
	require.Equal(t, "t-1", m.Mark.Name, "the cut turn is answered")
	require.Positive(t, tw.mediaSoFar(), "the cut turn's answer is spoken")

	// The speech goes on (t-2 starts at frame 50), then 1 s of silence
	// ends it.
	for range 30 + 50 {
		tw.speak(frame, &chunk)
	}
	m = tw.next()
	require.NotEqual(t, twilio.EventClear, m.Event, "speech going on after a cut cleared the cut turn's answer")
	require.Equal(t, "t-2", m.Mark.Name, "%+v", m)
	tw.stopAndWait()
}
