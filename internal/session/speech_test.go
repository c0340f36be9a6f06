package session_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/deadline"
	"github.com/voiced/voiced/internal/pipeline"
	"github.com/voiced/voiced/internal/protocol"
	"github.com/voiced/voiced/internal/session"
	"github.com/voiced/voiced/internal/stages/tts"
)

// The real embedded synthesiser, shared by the tests (it is safe for
// concurrent use and loads its voices once).
var (
	fliteOnce sync.Once
	fliteEng  *tts.Engine
	fliteErr  error
)

func flite(t *testing.T) *tts.Engine {
	t.Helper()
	fliteOnce.Do(func() { fliteEng, fliteErr = tts.New(tts.Config{}, nil, nil) })
	if errors.Is(fliteErr, tts.ErrUnavailable) {
		t.Skip("no embedded speech synthesiser in this build (cgo off)")
	}
	require.NoError(t, fliteErr)
	return fliteEng
}

// speechHarness serves speech with the real engine. Its budgets are far
// longer than speech needs on an idle machine, so that the tests hold on
// a loaded one; the test of the budget sets its own tight speech cap.
func speechHarness(t *testing.T, fake *fakeStages, pcfg pipeline.Config) *harness {
	if pcfg.TTS.Cap == 0 {
		pcfg.TTS.Cap = roomy - time.Second
	}
	return newHarness(t, fake, pcfg, session.Config{Speech: flite(t), MaxBudget: roomy})
}

// roomy is the deadline of requests whose speech must not be cut.
const roomy = 6 * time.Second

// speak turns speech on.
func (c *client) speak(voice string, rate int, encoding string) {
	c.h.t.Helper()
	c.sendText(`{"type":"session.update","speech":{"voice":"` + voice + `","sampleRate":` + itoa(rate) + `,"encoding":"` + encoding + `"}}`)
}

func itoa(n int) string { return strconv.Itoa(n) }

func deadlineStage(capv, minv time.Duration) deadline.Stage {
	return deadline.Stage{Cap: capv, Min: minv}
}

// audioOf decodes an answer.audio message.
func audioOf(t *testing.T, m protocol.ServerMessage) (protocol.AnswerAudioHeader, []int16) {
	t.Helper()
	h, pcm, err := protocol.DecodeAnswerAudio(m.Raw, false)
	require.NoError(t, err)
	return h, pcm
}

// checkAudio checks the answer.audio of request id among msgs: seq from 0
// without gaps, one final and it is the last, at rate. It returns the
// samples.
func checkAudio(t *testing.T, id string, rate int, msgs []protocol.ServerMessage) int {
	t.Helper()
	var seq int64
	samples, final := 0, false
	for _, m := range msgs {
		if m.Type != protocol.TypeAnswerAudio || m.RequestID != id {
			continue
		}
		require.False(t, final, "answer.audio after the final one")
		h, pcm := audioOf(t, m)
		require.Equal(t, seq, h.Seq)
		require.Equal(t, rate, h.SampleRate)
		require.LessOrEqual(t, len(pcm), rate/5, "at most 200 ms a chunk")
		seq++
		samples += len(pcm)
		final = h.Final
	}
	if seq > 0 {
		require.True(t, final, "the last chunk is final")
	}
	return samples
}

func TestSpeechReady(t *testing.T) {
	h := speechHarness(t, &fakeStages{}, pipeline.Config{})
	c := h.dial()
	require.Equal(t, &protocol.SpeechInfo{Engine: "flite", Voices: []string{"slt", "kal", "awb", "rms"},
		SampleRates: tts.SampleRates()}, c.ready.Speech)

	// Speech is off until asked for.
	c.audio("r1", 0, true, time.Now().Add(time.Second))
	term, before := c.terminal("r1")
	require.Nil(t, resultOf(t, term).Speech)
	for _, m := range before {
		require.NotEqual(t, protocol.TypeAnswerAudio, m.Type)
	}

	off := newHarness(t, &fakeStages{}, pipeline.Config{}, session.Config{}).dial()
	require.Nil(t, off.ready.Speech, "no engine: no speech in session.ready")
}

func TestSpeechOn(t *testing.T) {
	for _, enc := range []string{protocol.SpeechBinary, protocol.SpeechBase64} {
		t.Run(enc, func(t *testing.T) {
			h := speechHarness(t, &fakeStages{}, pipeline.Config{})
			c := h.dial()
			c.speak("kal", 24000, enc)
			c.audio("r1", 0, true, time.Now().Add(roomy))
			term, before := c.terminal("r1")
			res := resultOf(t, term)
			samples := checkAudio(t, "r1", 24000, before)
			require.Positive(t, samples)
			if enc == protocol.SpeechBinary {
				require.Positive(t, c.binaries)
			} else {
				require.Zero(t, c.binaries)
			}
			sp := res.Speech
			require.NotNil(t, sp)
			require.Equal(t, "flite", sp.Engine)
			require.Equal(t, "kal", sp.Voice)
			require.Equal(t, 1, sp.Sentences, "Your order ships today.")
			require.Equal(t, 1, sp.SpokenSentences)
			require.Equal(t, int64(samples*1000/24000), sp.AudioMs)
			require.NotNil(t, sp.FirstAudioMs)
			require.LessOrEqual(t, *sp.FirstAudioMs, res.Timings.Total)
			require.Empty(t, res.Degradation)
			require.Empty(t, c.ping(), "nothing after the terminal")
			require.EqualValues(t, 1, metricValue(t, h, "voiced_time_to_first_audio_seconds"), "one observation")
		})
	}
}

func TestSpeechBadUpdate(t *testing.T) {
	tests := []struct{ name, msg string }{
		{"unknown voice", `{"type":"session.update","speech":{"voice":"alloy"}}`},
		{"bad rate", `{"type":"session.update","speech":{"sampleRate":11025}}`},
		{"bad encoding", `{"type":"session.update","speech":{"encoding":"opus"}}`},
		{"not an object", `{"type":"session.update","speech":"on"}`},
		{"negative playback", `{"type":"playback","requestId":"r1","playedMs":-5}`},
		{"unknown playback id", `{"type":"playback","requestId":"nope","playedMs":5}`},
	}
	h := speechHarness(t, &fakeStages{}, pipeline.Config{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := h.dial()
			c.sendText(tt.msg)
			e := errorOf(t, c.next())
			require.Equal(t, protocol.CodeBadMessage, e.Code)
			require.Empty(t, e.RequestID)
			// The session survives, with speech still off.
			c.audio("r1", 0, true, time.Now().Add(time.Second))
			term, before := c.terminal("r1")
			require.Nil(t, resultOf(t, term).Speech)
			require.Zero(t, checkAudio(t, "r1", 16000, before))
		})
	}
	off := newHarness(t, &fakeStages{}, pipeline.Config{}, session.Config{}).dial()
	off.speak("slt", 16000, "binary")
	require.Equal(t, protocol.CodeBadMessage, errorOf(t, off.next()).Code, "no engine")

	// speech null turns it off again.
	c := h.dial()
	c.speak("slt", 16000, "base64")
	c.sendText(`{"type":"session.update","speech":null}`)
	c.audio("r2", 0, true, time.Now().Add(time.Second))
	term, _ := c.terminal("r2")
	require.Nil(t, resultOf(t, term).Speech)
}

// A cancelled request's synthesis stops, and nothing of it follows its
// terminal message.
func TestSpeechCancel(t *testing.T) {
	spoke := make(chan struct{})
	fake := &fakeStages{generate: func(ctx context.Context, emit func(string)) (pipeline.Generation, error) {
		emit("Your order shipped yesterday from our warehouse in Leeds. ")
		close(spoke)
		return blockUntilDone[pipeline.Generation](ctx)
	}}
	h := speechHarness(t, fake, pipeline.Config{LLM: deadlineStage(roomy, 0)})
	c := h.dial()
	c.speak("", 16000, "binary")
	c.audio("r1", 0, true, time.Now().Add(roomy))
	// Wait for the first chunk, then cancel.
	for {
		m := c.next()
		require.False(t, protocol.Terminal(m.Type), "terminal before any audio: %s", m.Raw)
		if m.Type == protocol.TypeAnswerAudio {
			break
		}
	}
	<-spoke
	c.sendJSON(protocol.Cancel{Type: protocol.TypeCancel, RequestID: "r1"})
	term, before := c.terminal("r1")
	require.Equal(t, protocol.CodeCancelled, errorOf(t, term).Code)
	for _, m := range before {
		if m.Type == protocol.TypeAnswerAudio {
			h, _ := audioOf(t, m)
			require.False(t, h.Final, "no final chunk for a cancelled request")
		}
	}
	require.Empty(t, c.ping(), "nothing after the terminal")
}

// A budget too tight for the whole answer's speech degrades the result,
// which is still on time.
func TestSpeechBudget(t *testing.T) {
	long := "Your order shipped yesterday. It left our warehouse in the evening. It should arrive on Friday. " +
		"You can track it from the Orders page. The courier will text you an hour before delivery. " +
		"If you are not at home, the parcel goes to your nearest pickup point. You have seven days to collect it."
	fake := &fakeStages{generate: func(ctx context.Context, emit func(string)) (pipeline.Generation, error) {
		emit(long)
		return pipeline.Generation{Provider: "fake"}, nil
	}}
	// The speech stage may run 40 ms: some sentences, never all of them.
	h := speechHarness(t, fake, pipeline.Config{TTS: deadlineStage(40*time.Millisecond, time.Millisecond)})
	c := h.dial()
	c.speak("", 16000, "binary")
	deadline := time.Now().Add(roomy)
	c.audio("r1", 0, true, deadline)
	term, before := c.terminal("r1")
	require.True(t, time.Now().Before(deadline))
	res := resultOf(t, term)
	samples := checkAudio(t, "r1", 16000, before)
	require.Equal(t, long, res.Answer, "the text answer stays whole")
	require.Less(t, res.Speech.SpokenSentences, res.Speech.Sentences)
	reason := pipeline.ReasonSpeechTruncated
	if samples == 0 {
		reason = pipeline.ReasonSpeechSkipped
		require.Zero(t, res.Speech.SpokenSentences)
	}
	require.Equal(t, []string{reason}, res.Degradation)
	// Counted once the result is sent (Sink.Done), so the client may read
	// the result a moment before the count.
	require.Eventually(t, func() bool {
		return metricValue(t, h, `voiced_degradations_total{reason="`+reason+`"}`) == 1
	}, testTimeout, time.Millisecond, "one degraded answer counted")
	require.EqualValues(t, 0, metricValue(t, h, "voiced_late_terminals_total"))
}

// playback cuts the assistant's turn in the history to what was heard.
func TestPlaybackCutsHistory(t *testing.T) {
	const first, second = "Your order shipped yesterday.", " It arrives on Friday."
	fake := &fakeStages{generate: func(ctx context.Context, emit func(string)) (pipeline.Generation, error) {
		emit(first)
		emit(second)
		return pipeline.Generation{Provider: "fake"}, nil
	}}
	h := speechHarness(t, fake, pipeline.Config{})
	c := h.dial()
	c.speak("", 16000, "binary")
	c.audio("r1", 0, true, time.Now().Add(roomy))
	term, _ := c.terminal("r1")
	require.Equal(t, 2, resultOf(t, term).Speech.SpokenSentences)

	// The first sentence's audio, as the same engine speaks it.
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	one, err := flite(t).Synthesize(ctx, tts.Request{Text: first, SampleRate: 16000}, func([]int16) {})
	require.NoError(t, err)
	played := one.Audio() + 5*time.Millisecond

	c.sendJSON(protocol.Playback{Type: protocol.TypePlayback, RequestID: "r1", PlayedMs: played.Milliseconds()})
	c.audio("r2", 0, true, time.Now().Add(roomy))
	c.terminal("r2")
	fake.mu.Lock()
	hist := fake.reqs[1].History
	fake.mu.Unlock()
	require.Len(t, hist, 1)
	require.Equal(t, first, hist[0].Assistant, "cut to what was heard")

	// A later report replaces it: all of it heard.
	c.sendJSON(protocol.Playback{Type: protocol.TypePlayback, RequestID: "r1", PlayedMs: 60000})
	c.audio("r3", 0, true, time.Now().Add(roomy))
	c.terminal("r3")
	fake.mu.Lock()
	hist = fake.reqs[2].History
	fake.mu.Unlock()
	require.Equal(t, first+second, hist[0].Assistant)

	// A playedMs past what a time.Duration holds (2^64 ns / 1e6, plus a
	// little) wrapped around to about 0.45 ms and cut it to nothing.
	c.sendText(`{"type":"playback","requestId":"r1","playedMs":18446744073710}`)
	c.audio("r4", 0, true, time.Now().Add(roomy))
	c.terminal("r4")
	fake.mu.Lock()
	hist = fake.reqs[3].History
	fake.mu.Unlock()
	require.Equal(t, first+second, hist[0].Assistant, "all of it was played")
}

// BenchmarkTimeToFirstAudio measures, through a real session with the
// real engine (slt, 16 kHz, binary), the time from the answer's first
// sentence being complete (the LLM's delta that ends it) to the client
// reading its first answer.audio, and from the final frame sent to that
// read. It reports the p50 and p95 of both.
func BenchmarkTimeToFirstAudio(b *testing.B) {
	eng, err := tts.New(tts.Config{}, nil, nil)
	if errors.Is(err, tts.ErrUnavailable) {
		b.Skip("no embedded speech synthesiser in this build")
	}
	if err != nil {
		b.Fatal(err)
	}
	sentenceAt := make(chan time.Time, 1)
	fake := &fakeStages{generate: func(ctx context.Context, emit func(string)) (pipeline.Generation, error) {
		sentenceAt <- time.Now()
		emit("Your order shipped yesterday afternoon. ")
		if err := sleepCtx(ctx, 50*time.Millisecond); err != nil {
			return pipeline.Generation{}, err
		}
		emit("It should arrive on Friday.")
		return pipeline.Generation{Provider: "fake"}, nil
	}}
	h := newHarness(b, fake, pipeline.Config{TTS: deadlineStage(roomy-time.Second, 0)}, session.Config{Speech: eng, MaxBudget: roomy})
	c := h.dial()
	c.speak("slt", 16000, "binary")
	var afterSentence, afterFinal []time.Duration
	for i := 0; b.Loop(); i++ {
		id := "r" + strconv.Itoa(i)
		sent := time.Now()
		c.audio(id, 0, true, time.Now().Add(roomy))
		var at time.Time
		for {
			m := c.next()
			if m.Type == protocol.TypeAnswerAudio && at.IsZero() {
				got := time.Now()
				at = <-sentenceAt
				afterSentence = append(afterSentence, got.Sub(at))
				afterFinal = append(afterFinal, got.Sub(sent))
			}
			if m.RequestID == id && protocol.Terminal(m.Type) {
				break
			}
		}
	}
	for _, q := range []struct {
		name string
		d    []time.Duration
	}{{"after-sentence", afterSentence}, {"after-final", afterFinal}} {
		slices.Sort(q.d)
		b.ReportMetric(float64(q.d[len(q.d)*50/100].Microseconds())/1000, "ms-p50-"+q.name)
		b.ReportMetric(float64(q.d[len(q.d)*95/100].Microseconds())/1000, "ms-p95-"+q.name)
	}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}
