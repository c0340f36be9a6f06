package session_test

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/pipeline"
	"github.com/voiced/voiced/internal/protocol"
	"github.com/voiced/voiced/internal/session"
	"github.com/voiced/voiced/internal/stages/tts"
	ttsflite "github.com/voiced/voiced/internal/stages/tts/flite"
)

// waitingForLink reports whether some goroutine waits for a client's link
// (answer audio paced to it).
func waitingForLink() bool {
	buf := make([]byte, 1<<20)
	return strings.Contains(string(buf[:runtime.Stack(buf, true)]), "(*request).awaitLink")
}

// ownEngine is a Flite engine of the test's own: its slots and learned
// speeds are not shared with other tests.
func ownEngine(t *testing.T, cfg tts.Config) *tts.Engine {
	t.Helper()
	flite(t) // skips without cgo
	eng, err := tts.New(cfg, nil, nil)
	require.NoError(t, err)
	return eng
}

// TestSlowLinkHoldsNoSynthesisSlot: a client on a slow link waits for its
// link, not for another client's. The wait for the link used to happen in
// emit, inside the synthesiser's callback, which holds one of the engine's
// slots (-tts.parallel, one per CPU) and an OS thread for as long as the
// link takes: a few slow clients took every slot and another session's
// answer, on a fast link, had no speech at all (speech_skipped).
func TestSlowLinkHoldsNoSynthesisSlot(t *testing.T) {
	eng := ownEngine(t, tts.Config{Flite: ttsflite.Config{Parallel: 1}})
	answer := strings.Repeat("Your order left our warehouse this morning and should arrive on Friday. ", 4)
	fake := &fakeStages{generate: func(_ context.Context, emit func(string)) (pipeline.Generation, error) {
		emit(answer)
		return pipeline.Generation{Provider: "fake"}, nil
	}}
	h := newHarness(t, fake, pipeline.Config{TTS: deadlineStage(roomy-time.Second, 0)}, session.Config{Speech: eng, MaxBudget: roomy})

	slow := h.dialSlowLink(4 << 10) // never read: its link carries nothing
	slow.speak("slt", 16000, protocol.SpeechBinary)
	slow.audio("slow", 0, true, time.Now().Add(roomy))
	require.Eventually(t, waitingForLink, 5*time.Second, 5*time.Millisecond, "the slow client's audio waits for its link")

	fast := h.dial()
	fast.speak("slt", 16000, protocol.SpeechBinary)
	fast.audio("fast", 0, true, time.Now().Add(2500*time.Millisecond))
	term, before := fast.terminal("fast")
	res := resultOf(t, term)
	samples := checkAudio(t, "fast", 16000, before)
	t.Logf("fast client: %.1f s of audio, degradation %v", float64(samples)/16000, res.Degradation)
	require.NotContains(t, res.Degradation, "speech_skipped", "the slow client's wait took the synthesiser")
	require.Positive(t, samples)
}

// TestSlowLinkTeachesNoSynthesisSpeed: the engine's learned speed (shared
// by every session: it sizes answers and decides whether a sentence is
// started) is the synthesiser's, not the client's link's. Waiting for the
// link inside the synthesiser's callback counted the wait as synthesis
// time, and one slow client made every session's speech shorter.
func TestSlowLinkTeachesNoSynthesisSpeed(t *testing.T) {
	eng := ownEngine(t, tts.Config{Alpha: 1}) // one sample is the speed
	answer := strings.Repeat("Your order left our warehouse this morning and should arrive on Friday. ", 4)
	fake := &fakeStages{generate: func(_ context.Context, emit func(string)) (pipeline.Generation, error) {
		emit(answer)
		return pipeline.Generation{Provider: "fake"}, nil
	}}
	h := newHarness(t, fake, pipeline.Config{TTS: deadlineStage(roomy-time.Second, 0)}, session.Config{Speech: eng, MaxBudget: roomy})
	c := h.dialSlowLink(20 << 10)
	c.speak("slt", 16000, protocol.SpeechBinary)
	c.audio("r1", 0, true, time.Now().Add(2500*time.Millisecond))
	term, _ := c.terminal("r1")
	res := resultOf(t, term)
	est := eng.Estimate("slt", 100)
	t.Logf("degradation %v; 100 characters now expected to take %v", res.Degradation, est)
	// Flite says 100 characters in well under a second, loaded or not
	// (the engine starts from 0.5 s); the link took seconds.
	require.Less(t, est, time.Second, "the wait for the link was learned as synthesis time")
}
