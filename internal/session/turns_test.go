package session_test

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/audio/mulaw"
	"github.com/voiced/voiced/internal/audio/resample"
	"github.com/voiced/voiced/internal/pipeline"
	"github.com/voiced/voiced/internal/protocol"
	"github.com/voiced/voiced/internal/session"
	"github.com/voiced/voiced/internal/stages/stt/sttest"
	"github.com/voiced/voiced/internal/vad"
)

// span is where speech truly is in a test stream, in ms from its start.
type span struct{ start, end int64 }

// speechClip returns text spoken by flite's slt at 16 kHz and where its
// speech starts and ends, in samples: the first and last 10 ms window
// within 40 dB of the loudest.
func speechClip(t *testing.T, text string) ([]int16, int, int) {
	t.Helper()
	if !vad.Available {
		t.Skip("no voice activity detector in this build (cgo off)")
	}
	v, _ := sttest.VoiceByName("flite-slt")
	if !v.Available() {
		t.Skip("flite is not installed")
	}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	pcm, rate, err := sttest.Synth(ctx, v, text)
	require.NoError(t, err)
	require.Equal(t, 16000, rate)
	const w = 160
	var pows []float64
	peak := 0.0
	for i := 0; i+w <= len(pcm); i += w {
		p := 0.0
		for _, s := range pcm[i : i+w] {
			p += float64(s) * float64(s)
		}
		pows = append(pows, p/w)
		peak = max(peak, p/w)
	}
	start, end := -1, 0
	for i, p := range pows {
		if p > peak*1e-4 {
			if start < 0 {
				start = i * w
			}
			end = (i + 1) * w
		}
	}
	return pcm, start, end
}

// conversation joins the texts spoken, with gapMs of silence before each
// and after the last, and returns the stream at 16 kHz, where each
// utterance's speech is, and the sample where each utterance's audio ends
// (the next gap begins).
func conversation(t *testing.T, gapMs int, texts ...string) ([]int16, []span, []int) {
	t.Helper()
	gap := make([]int16, gapMs*16)
	var out []int16
	var spans []span
	var ends []int
	for _, text := range texts {
		out = append(out, gap...)
		pcm, s, e := speechClip(t, text)
		spans = append(spans, span{int64(len(out)+s) / 16, int64(len(out)+e) / 16})
		out = append(out, pcm...)
		ends = append(ends, len(out))
	}
	return append(out, gap...), spans, ends
}

// streamer sends a server-turn session's stream in 20 ms frames.
type streamer struct {
	c     *client
	seq   int64
	rate  int
	muLaw bool
}

func (s *streamer) send(pcm []int16) {
	s.c.h.t.Helper()
	n := s.rate / 50
	for len(pcm) > 0 {
		f := pcm[:min(n, len(pcm))]
		pcm = pcm[len(f):]
		var payload []byte
		if s.muLaw {
			payload = mulaw.AppendEncode(nil, f)
		} else {
			payload = protocol.AppendPCM(nil, f)
		}
		s.c.sendBinary(protocol.EncodeStreamAudio(nil, s.seq, 0, payload))
		s.seq++
	}
}

// serverTurns switches the session to server turns (extra: more fields
// of turnDetection, each with a leading comma) and checks that the
// update drew no reply.
func (c *client) serverTurns(extra string) *streamer {
	c.h.t.Helper()
	c.sendText(`{"type":"session.update","turnDetection":{"mode":"server"` + extra + `}}`)
	require.Empty(c.h.t, c.ping(), "an accepted session.update draws no reply")
	return &streamer{c: c, rate: 16000}
}

// turnOf reads the messages of one turn up to its terminal and checks
// their order: speech_started first, speech_stopped before the terminal.
func turnOf(t *testing.T, c *client, id string) (started protocol.SpeechStarted, stopped *protocol.SpeechStopped, term protocol.ServerMessage) {
	t.Helper()
	term, before := c.terminal(id)
	return checkTurn(t, id, before, term)
}

// turnsOf reads until every one of ids has its terminal message (their
// messages may interleave) and checks each turn as turnOf does.
func turnsOf(t *testing.T, c *client, ids ...string) map[string]protocol.ServerMessage {
	t.Helper()
	msgs := map[string][]protocol.ServerMessage{}
	terms := map[string]protocol.ServerMessage{}
	waiting := func() bool {
		for _, id := range ids {
			if _, ok := terms[id]; !ok {
				return true
			}
		}
		return false
	}
	for waiting() {
		m := c.next()
		if _, done := terms[m.RequestID]; done {
			t.Fatalf("message after the terminal of %s: %s", m.RequestID, m.Raw)
		}
		if protocol.Terminal(m.Type) {
			terms[m.RequestID] = m
			continue
		}
		msgs[m.RequestID] = append(msgs[m.RequestID], m)
	}
	for _, id := range ids {
		term, ok := terms[id]
		require.True(t, ok, "no terminal for %s", id)
		checkTurn(t, id, msgs[id], term)
	}
	return terms
}

// checkTurn checks the messages of one turn before its terminal.
func checkTurn(t *testing.T, id string, before []protocol.ServerMessage, term protocol.ServerMessage) (started protocol.SpeechStarted, stopped *protocol.SpeechStopped, _ protocol.ServerMessage) {
	t.Helper()
	var mine []protocol.ServerMessage
	for _, m := range before {
		if m.RequestID == id {
			mine = append(mine, m)
		}
	}
	require.NotEmpty(t, mine, "turn %s: no message before its terminal", id)
	require.Equal(t, protocol.TypeSpeechStarted, mine[0].Type, "turn %s: first message %s", id, mine[0].Raw)
	require.NoError(t, mine[0].As(&started))
	for _, m := range mine[1:] {
		require.NotEqual(t, protocol.TypeSpeechStarted, m.Type)
		if m.Type == protocol.TypeSpeechStopped {
			require.Nil(t, stopped, "turn %s: two speech_stopped", id)
			stopped = new(protocol.SpeechStopped)
			require.NoError(t, m.As(stopped))
		}
	}
	return started, stopped, term
}

// requireNone checks that none of msgs belongs to id.
func requireNone(t *testing.T, msgs []protocol.ServerMessage, id string) {
	t.Helper()
	for _, m := range msgs {
		require.NotEqual(t, id, m.RequestID, "message after the terminal of %s: %s", id, m.Raw)
	}
}

func TestServerTurns(t *testing.T) {
	h := newHarness(t, &fakeStages{}, pipeline.Config{}, session.Config{})
	c := h.dial()
	s := c.serverTurns(`,"budgetMs":1200,"silenceMs":500`)
	pcm, truth, ends := conversation(t, 1000, "where is my order", "i want to return my shoes")

	// The first utterance and the gap after it; its turn ends within it.
	s.send(pcm[:ends[0]+16*900])
	for i, id := range []string{"t-1", "t-2"} {
		if i == 1 {
			s.send(pcm[ends[0]+16*900:])
		}
		started, stopped, term := turnOf(t, c, id)
		res := resultOf(t, term)
		require.Equal(t, "where is my order", res.Transcript)
		require.NotNil(t, stopped, "turn %s: no speech_stopped", id)
		// Where speech was judged to start and end, in the stream.
		require.InDelta(t, truth[i].start, started.AudioStartMs, 200, "turn %s start (truth %d)", id, truth[i].start)
		require.InDelta(t, truth[i].end, stopped.AudioEndMs, 200, "turn %s end (truth %d)", id, truth[i].end)
		require.InDelta(t, 500, stopped.DecidedMs-stopped.AudioEndMs, 40, "turn %s: decided silenceMs after its end", id)
		// The deadline runs from the detected end: budgetMs after it.
		require.Equal(t, int64(1200), res.Budget.EffectiveBudgetMs)
		require.False(t, res.Degraded, "%v", res.Degradation)
	}
	requireNone(t, c.ping(), "t-1")
}

func TestServerTurnsBudgetCappedByServer(t *testing.T) {
	h := newHarness(t, &fakeStages{}, pipeline.Config{}, session.Config{MaxBudget: time.Second})
	c := h.dial()
	s := c.serverTurns(`,"budgetMs":5000`)
	pcm, _, _ := conversation(t, 800, "where is my order")
	s.send(pcm)
	_, _, term := turnOf(t, c, "t-1")
	require.Equal(t, int64(1000), resultOf(t, term).Budget.EffectiveBudgetMs)

	// A new update restarts the stream (seq from 0) but not the ids.
	s = c.serverTurns(`,"budgetMs":800`)
	s.send(pcm)
	_, _, term = turnOf(t, c, "t-2")
	require.Equal(t, int64(800), resultOf(t, term).Budget.EffectiveBudgetMs)
}

func TestServerTurnInterrupt(t *testing.T) {
	for _, tc := range []struct {
		name      string
		interrupt string
	}{
		{"interrupt", `,"interrupt":true`},
		{"queue behind", `,"interrupt":false`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gen := make(chan struct{}, 1)
			fake := &fakeStages{generate: func(ctx context.Context, emit func(string)) (pipeline.Generation, error) {
				select {
				case gen <- struct{}{}:
				default:
				}
				<-ctx.Done() // an answer that takes its whole budget
				return pipeline.Generation{}, ctx.Err()
			}}
			h := newHarness(t, fake, pipeline.Config{}, session.Config{MaxBudget: 3 * time.Second})
			c := h.dial()
			s := c.serverTurns(tc.interrupt + `,"budgetMs":3000`)
			pcm, _, ends := conversation(t, 700, "where is my order", "i want to return my shoes")
			s.send(pcm[:ends[0]+16*650])
			// t-1's speech has stopped and its answer is being written.
			for m := c.next(); m.Type != protocol.TypeSpeechStopped; m = c.next() {
			}
			select {
			case <-gen:
			case <-h.ctx.Done():
				t.Fatal("t-1's answer did not start")
			}
			s.send(pcm[ends[0]+16*650:])
			if tc.interrupt == `,"interrupt":true` {
				term, before := c.terminal("t-1")
				require.Equal(t, protocol.CodeInterrupted, errorOf(t, term).Code)
				for _, m := range before {
					require.NotEqual(t, "t-2", m.RequestID, "t-2 began before t-1 ended")
				}
				m := c.next()
				require.Equal(t, protocol.TypeSpeechStarted, m.Type)
				require.Equal(t, "t-2", m.RequestID)
				term2, after := c.terminal("t-2")
				requireNone(t, after, "t-1")
				require.Equal(t, protocol.TypeResult, term2.Type, "%s", term2.Raw)
				requireMetric(t, h, `voiced_cancellations_total{cause="interrupted"}`, 1)
				return
			}
			// Without interrupt both turns are answered.
			got := map[string]string{}
			for len(got) < 2 {
				m := c.next()
				if protocol.Terminal(m.Type) {
					got[m.RequestID] = m.Type
				}
			}
			require.Equal(t, map[string]string{"t-1": protocol.TypeResult, "t-2": protocol.TypeResult}, got)
		})
	}
}

// requireMetric checks one sample of the harness's registry.
func requireMetric(t *testing.T, h *harness, series string, want float64) {
	t.Helper()
	mfs, err := h.reg.Gather()
	require.NoError(t, err)
	name, labels, _ := strings.Cut(series, "{")
	labels = strings.TrimSuffix(labels, "}")
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			var parts []string
			for _, l := range m.GetLabel() {
				parts = append(parts, l.GetName()+`="`+l.GetValue()+`"`)
			}
			if strings.Join(parts, ",") == labels {
				require.Equal(t, want, m.GetCounter().GetValue(), series)
				return
			}
		}
	}
	t.Fatalf("no series %s", series)
}

func TestServerTurnCancel(t *testing.T) {
	h := newHarness(t, &fakeStages{}, pipeline.Config{}, session.Config{})
	c := h.dial()
	s := c.serverTurns("")
	pcm, truth, _ := conversation(t, 600, "i want to return my shoes please")
	cut := int(truth[0].start+700) * 16
	s.send(pcm[:cut])
	m := c.next()
	require.Equal(t, protocol.TypeSpeechStarted, m.Type, "%s", m.Raw)
	require.Equal(t, "t-1", m.RequestID)
	c.sendJSON(protocol.Cancel{Type: protocol.TypeCancel, RequestID: "t-1"})
	term, _ := c.terminal("t-1")
	require.Equal(t, protocol.CodeCancelled, errorOf(t, term).Code)
	// The rest of the cancelled turn's speech is dropped, with no event.
	s.send(pcm[cut:])
	requireNone(t, c.ping(), "t-1")
}

func TestServerTurnLongerThanMaxAudio(t *testing.T) {
	h := newHarness(t, &fakeStages{}, pipeline.Config{}, session.Config{MaxAudioPerRequest: time.Second})
	c := h.dial()
	s := c.serverTurns(`,"prefixMs":0`)
	pcm, _, _ := conversation(t, 600, "i would like to know where my order is and when it will arrive at my house")
	s.send(pcm)
	// The speech after the cut is a turn of its own, which does not
	// interrupt the cut one.
	terms := turnsOf(t, c, "t-1", "t-2")
	res := resultOf(t, terms["t-1"])
	require.True(t, res.Degraded)
	require.Contains(t, res.Degradation, session.ReasonTurnCut)
}

func TestServerTurnsBadInput(t *testing.T) {
	for _, tc := range []struct {
		name   string
		server bool // switch to server turns first
		send   func(c *client)
		code   protocol.Code
	}{
		{"silenceMs out of range", false, func(c *client) {
			c.sendText(`{"type":"session.update","turnDetection":{"mode":"server","silenceMs":50}}`)
		}, protocol.CodeBadMessage},
		{"budgetMs out of range", false, func(c *client) {
			c.sendText(`{"type":"session.update","turnDetection":{"mode":"server","budgetMs":99}}`)
		}, protocol.CodeBadMessage},
		{"prefixMs negative", false, func(c *client) {
			c.sendText(`{"type":"session.update","turnDetection":{"mode":"server","prefixMs":-1}}`)
		}, protocol.CodeBadMessage},
		{"unknown mode", false, func(c *client) {
			c.sendText(`{"type":"session.update","turnDetection":{"mode":"semantic"}}`)
		}, protocol.CodeBadMessage},
		{"unknown field", false, func(c *client) {
			c.sendText(`{"type":"session.update","turnDetection":{"mode":"server","eagerness":"high"}}`)
		}, protocol.CodeBadMessage},
		{"mu-law at 16 kHz", false, func(c *client) {
			c.sendText(`{"type":"session.update","encoding":"mulaw","sampleRate":16000}`)
		}, protocol.CodeBadAudio},
		{"requestId in server mode", true, func(c *client) { c.audio("r1", 0, false, time.Now().Add(time.Second)) }, protocol.CodeBadMessage},
		{"final in server mode", true, func(c *client) {
			c.sendText(`{"type":"audio","seq":0,"final":true,"audio":""}`)
		}, protocol.CodeBadMessage},
		{"seq gap", true, func(c *client) {
			c.sendBinary(protocol.EncodeStreamAudio(nil, 0, 0, make([]byte, 640)))
			c.sendBinary(protocol.EncodeStreamAudio(nil, 2, 0, make([]byte, 640)))
		}, protocol.CodeBadMessage},
		{"sampleRate changed in the stream", true, func(c *client) {
			c.sendBinary(protocol.EncodeStreamAudio(nil, 0, 8000, make([]byte, 320)))
		}, protocol.CodeBadAudio},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.server && !vad.Available {
				t.Skip("no voice activity detector in this build")
			}
			h := newHarness(t, &fakeStages{}, pipeline.Config{}, session.Config{})
			c := h.dial()
			if tc.server {
				c.serverTurns("")
			}
			tc.send(c)
			before := c.ping() // the session survives
			require.Len(t, before, 1, "%v", before)
			e := errorOf(t, before[0])
			require.Equal(t, tc.code, e.Code, e.Message)
			require.Empty(t, e.RequestID, "a session-level error")
		})
	}
}

// TestMuLawClientTurns sends a client-turn request as 8 kHz μ-law (a
// frame of 161 bytes: μ-law has no even-length rule).
func TestMuLawClientTurns(t *testing.T) {
	h := newHarness(t, &fakeStages{}, pipeline.Config{}, session.Config{})
	c := h.dial()
	c.sendText(`{"type":"session.update","encoding":"mulaw"}`)
	require.Empty(t, c.ping())
	payload := make([]byte, 161)
	for i := range payload {
		payload[i] = mulaw.Encode(int16(8000 * math.Sin(float64(i)/5)))
	}
	b, err := protocol.EncodeBinaryAudio(nil, protocol.AudioHeader{RequestID: "m1", DeadlineAt: protocol.Millis(time.Now().Add(time.Second)), Final: true, SampleRate: 8000}, nil)
	require.NoError(t, err)
	c.sendBinary(append(b, payload...))
	term, _ := c.terminal("m1")
	resultOf(t, term)

	// A frame that claims another rate is bad audio, the request's error.
	b, err = protocol.EncodeBinaryAudio(nil, protocol.AudioHeader{RequestID: "m2", DeadlineAt: protocol.Millis(time.Now().Add(time.Second)), Final: true, SampleRate: 16000}, nil)
	require.NoError(t, err)
	c.sendBinary(append(b, payload...))
	term, _ = c.terminal("m2")
	require.Equal(t, protocol.CodeBadAudio, errorOf(t, term).Code)
}

// TestMuLawServerTurns streams the conversation as 8 kHz μ-law.
func TestMuLawServerTurns(t *testing.T) {
	h := newHarness(t, &fakeStages{}, pipeline.Config{}, session.Config{})
	c := h.dial()
	c.sendText(`{"type":"session.update","encoding":"mulaw","sampleRate":8000}`)
	s := c.serverTurns("")
	s.rate, s.muLaw = 8000, true
	pcm, truth, _ := conversation(t, 800, "where is my order")
	s.send(downsample(t, pcm))
	started, stopped, term := turnOf(t, c, "t-1")
	resultOf(t, term)
	require.NotNil(t, stopped)
	require.InDelta(t, truth[0].start, started.AudioStartMs, 200)
	require.InDelta(t, truth[0].end, stopped.AudioEndMs, 200)
}

// downsample converts 16 kHz PCM to 8 kHz.
func downsample(t *testing.T, pcm []int16) []int16 {
	t.Helper()
	r, err := resample.New(16000, 8000)
	require.NoError(t, err)
	return r.Flush(r.Process(nil, pcm))
}

// TestMuLawSpeech: a μ-law session whose speech is at 8000 Hz gets its
// answer.audio as μ-law (one byte a sample, "encoding":"mulaw"); at
// another rate, or in a PCM session, answer.audio stays 16-bit PCM.
func TestMuLawSpeech(t *testing.T) {
	for _, tc := range []struct {
		name, update string
		rate         int
		muLaw        bool
	}{
		{"mu-law session, speech at 8 kHz", `{"type":"session.update","encoding":"mulaw"}`, 8000, true},
		{"mu-law session, speech at 16 kHz", `{"type":"session.update","encoding":"mulaw"}`, 16000, false},
		{"PCM session, speech at 8 kHz", `{"type":"session.update","sampleRate":8000}`, 8000, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := speechHarness(t, &fakeStages{}, pipeline.Config{})
			c := h.dial()
			c.sendText(tc.update)
			c.speak("kal", tc.rate, protocol.SpeechBinary)
			require.Empty(t, c.ping())
			payload := make([]byte, 1600)
			if tc.update == `{"type":"session.update","sampleRate":8000}` {
				payload = make([]byte, 3200) // 16-bit PCM
			}
			b, err := protocol.EncodeBinaryAudio(nil, protocol.AudioHeader{RequestID: "s1",
				DeadlineAt: protocol.Millis(time.Now().Add(roomy)), Final: true}, nil)
			require.NoError(t, err)
			c.sendBinary(append(b, payload...))
			term, before := c.terminal("s1")
			res := resultOf(t, term)
			require.NotNil(t, res.Speech)
			require.Positive(t, res.Speech.AudioMs)
			samples := checkAudio(t, "s1", tc.rate, before)
			require.InDelta(t, res.Speech.AudioMs, samples*1000/tc.rate, 2)
			for _, m := range before {
				if m.Type != protocol.TypeAnswerAudio {
					continue
				}
				hd, _ := audioOf(t, m)
				if tc.muLaw {
					require.Equal(t, protocol.EncodingMuLaw, hd.Encoding)
				} else {
					require.Empty(t, hd.Encoding)
				}
			}
			require.Positive(t, c.binaries, "answer.audio came as binary frames")
		})
	}
}
