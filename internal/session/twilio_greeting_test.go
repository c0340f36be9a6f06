package session_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/pipeline"
	"github.com/voiced/voiced/internal/session"
	"github.com/voiced/voiced/internal/stages/tts"
	"github.com/voiced/voiced/internal/twilio"
)

// slowGreeting is the real synthesiser, except that the greeting streams
// at about real time (as a remote TTS service delivers it): greetingChunks of
// 100 ms of silence-free tone, 100 ms apart.
type slowGreeting struct {
	session.Synthesizer
	greeting string
	emitted  atomic.Int64 // greeting chunks emitted
	ctxDone  atomic.Bool  // the greeting's context ended before it did
}

func (s *slowGreeting) Synthesize(ctx context.Context, req tts.Request, emit func([]int16)) (tts.Result, error) {
	if req.Text != s.greeting {
		return s.Synthesizer.Synthesize(ctx, req, emit)
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for range greetingChunks {
		select {
		case <-ctx.Done():
			s.ctxDone.Store(true)
			return tts.Result{}, context.Cause(ctx)
		case <-tick.C:
		}
		chunk := make([]int16, 800)
		for i := range chunk {
			chunk[i] = int16(8000 * ((i / 10) % 2))
		}
		emit(chunk)
		s.emitted.Add(1)
	}
	return tts.Result{}, nil
}

// TestBargeInStopsGreeting: a caller who speaks while the greeting is
// still being synthesised (a long greeting, a TTS service that streams at
// real time) stops it: Twilio's clear drops what it holds, and no more of
// the greeting is sent after it.
func TestBargeInStopsGreeting(t *testing.T) {
	const greeting = "Thank you for calling. This call may be recorded. How can I help you today?"
	syn := &slowGreeting{Synthesizer: flite(t), greeting: greeting}
	h := newHarness(t, &fakeStages{}, pipeline.Config{TTS: deadlineStage(roomy-time.Second, 0)},
		session.Config{Speech: syn, MaxBudget: roomy, Greeting: greeting})
	tw := dialTwilio(t, h, "")
	tw.setAutoEcho(false)
	tw.start(nil)
	require.Eventually(t, func() bool { return tw.mediaSoFar() > 0 }, 5*time.Second, 10*time.Millisecond)
	pcm, _, _ := conversation(t, 100, "where is my order")
	chunk := 0
	tw.speak(downsample(t, pcm), &chunk)
	m := tw.next()
	require.Equal(t, twilio.EventClear, m.Event, "barge-in over the greeting clears it: %+v", m)
	// The greeting's synthesis ends (without the fix it ran on, every
	// chunk, until the call ended).
	require.Eventually(t, syn.ctxDone.Load, 5*time.Second, 5*time.Millisecond, "the greeting is stopped")
	require.Less(t, syn.emitted.Load(), int64(greetingChunks))
}

// greetingChunks is the slow greeting's length in 100 ms chunks: long
// enough (10 s) that a loaded machine detects the caller's speech well
// before it would end on its own.
const greetingChunks = 100
