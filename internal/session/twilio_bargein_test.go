package session_test

import (
	"context"
	"encoding/base64"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/pipeline"
	"github.com/voiced/voiced/internal/session"
	"github.com/voiced/voiced/internal/stages/tts"
	"github.com/voiced/voiced/internal/twilio"
)

// TestTwilioBargeInClearsWhenTurnRefused: a caller who speaks over an
// answer still playing interrupts it (its turn is ended) and Twilio must
// be told to drop the audio it holds, also when the new turn itself is
// refused (the server is saturated): otherwise the caller goes on hearing
// the answer the server has just abandoned.
func TestTwilioBargeInClearsWhenTurnRefused(t *testing.T) {
	syn := flite(t)
	l := &load{}
	h := newHarness(t, &fakeStages{}, pipeline.Config{TTS: deadlineStage(roomy-time.Second, 0)},
		session.Config{Speech: syn, MaxBudget: roomy, Load: l})
	tw := dialTwilio(t, h, "")
	tw.start(nil)
	m := tw.next()
	require.Equal(t, "greeting", m.Mark.Name)

	pcm, _, _ := conversation(t, 800, "where is my order")
	pcm = downsample(t, pcm)
	chunk := 0
	tw.setAutoEcho(false) // the first answer has not played when the caller speaks again
	tw.speak(pcm, &chunk)
	m = tw.next()
	require.Equal(t, twilio.EventMark, m.Event, "%+v", m)
	require.Equal(t, "t-1", m.Mark.Name)
	require.Positive(t, tw.mediaSoFar())

	l.on.Store(true) // saturated from now on: the next turn is refused
	tw.speak(pcm, &chunk)
	// Waited for before stop: nothing queued is written after stop. The
	// clear is queued as the caller starts speaking (bargeIn), before the
	// turn is started and refused: the refusal's count may follow it.
	m = tw.next()
	require.Equal(t, twilio.EventClear, m.Event, "barge-in over an unplayed answer clears it even when the new turn is refused: %+v", m)
	require.Eventually(t, func() bool {
		return metricValue(t, h, `voiced_overloaded_total{cause="saturated"}`) == 1
	}, testTimeout, time.Millisecond, "the second turn was refused")
	tw.stopAndWait()
}

// lateGreeting speaks a greeting in two chunks. The second is the one an
// engine had checked its context for just before the caller barged in
// (as Flite and the remote engine do: check, then emit): it reaches emit
// only after the greeting was stopped and the clear has gone out.
// Answers are silent.
type lateGreeting struct {
	cleared  chan struct{} // closed by the test when Twilio has the clear
	returned chan struct{} // closed when the greeting's Synthesize returns
}

const lateTail = 333 // samples in the late chunk: its μ-law payload's length

func (*lateGreeting) Name() string                          { return "late" }
func (*lateGreeting) Voices() []string                      { return []string{"v"} }
func (*lateGreeting) SampleRates() []int                    { return []int{8000, 16000} }
func (*lateGreeting) Estimate(string, int) time.Duration    { return time.Second }
func (*lateGreeting) MinEstimate(string, int) time.Duration { return time.Second }
func (g *lateGreeting) Synthesize(ctx context.Context, req tts.Request, emit func([]int16)) (tts.Result, error) {
	if req.Text != session.DefaultGreeting {
		return tts.Result{}, nil // answers: nothing said
	}
	defer close(g.returned)
	tone := func(n int) []int16 {
		pcm := make([]int16, n)
		for i := range pcm {
			pcm[i] = int16(8000 * ((i / 10) % 2))
		}
		return pcm
	}
	emit(tone(800))
	if ctx.Err() == nil { // checked before the barge-in...
		<-ctx.Done()
		<-g.cleared
		emit(tone(lateTail)) // ...emitted after it
	}
	return tts.Result{}, context.Cause(ctx)
}

// TestTwilioNoGreetingAfterClear: once the caller barges in over the
// greeting and Twilio has been sent clear, no more of the greeting may
// follow (it would play over the caller), even a chunk the engine was
// already emitting when the greeting was stopped.
func TestTwilioNoGreetingAfterClear(t *testing.T) {
	syn := &lateGreeting{cleared: make(chan struct{}), returned: make(chan struct{})}
	h := newHarness(t, &fakeStages{}, pipeline.Config{}, session.Config{Speech: syn, MaxBudget: roomy})
	tw := dialTwilio(t, h, "")
	tw.setAutoEcho(false)
	tw.start(nil)
	m := <-tw.msgs
	require.Equal(t, twilio.EventMedia, m.Event, "the greeting's first chunk")
	pcm, _, _ := conversation(t, 100, "where is my order")
	chunk := 0
	tw.speak(downsample(t, pcm), &chunk)
	for m = range tw.msgs {
		if m.Event == twilio.EventClear {
			break
		}
	}
	require.Equal(t, twilio.EventClear, m.Event)
	close(syn.cleared)
	<-syn.returned
	tw.send(map[string]any{"event": "stop", "streamSid": tw.sid, "stop": map[string]string{"accountSid": "AC0123", "callSid": "CA0123"}})
	for m := range tw.msgs {
		if m.Event == twilio.EventMedia {
			audio, err := base64.StdEncoding.DecodeString(m.Media.Payload)
			require.NoError(t, err)
			require.NotEqual(t, lateTail, len(audio), "greeting audio sent after the clear")
		}
	}
	<-tw.done
}
