package session_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/audio/mulaw"
	"github.com/voiced/voiced/internal/cancel"
	"github.com/voiced/voiced/internal/pipeline"
	"github.com/voiced/voiced/internal/session"
	"github.com/voiced/voiced/internal/twilio"
)

// twilioSide plays Twilio's side of a bidirectional Media Streams call,
// from Twilio's documentation: connected, start (string sequenceNumber,
// numeric mediaFormat), 160-byte μ-law media with rising chunk and
// timestamp, stop; it keeps the marks the server sends pending until their
// audio has "played" (at once with autoEcho), echoes them then, and echoes
// every pending mark on clear, as Twilio does.
type twilioSide struct {
	t    *testing.T
	ctx  context.Context
	conn *websocket.Conn
	sid  string
	msgs chan twilio.Message
	done chan struct{}
	// closeErr is why the reader stopped; read after done.
	closeErr error

	sendMu sync.Mutex // the caller and the echoes both send
	seq    int        // guarded by sendMu

	mu       sync.Mutex
	autoEcho bool     // guarded by mu
	pending  []string // marks not yet echoed; guarded by mu
	media    int      // media messages received; guarded by mu
	bytes    int      // μ-law bytes received; guarded by mu
}

func dialTwilio(t *testing.T, h *harness, query string) *twilioSide {
	t.Helper()
	hs := httptest.NewServer(http.HandlerFunc(h.srv.ServeTwilio))
	t.Cleanup(hs.Close)
	return dialTwilioAt(t, h, "ws"+strings.TrimPrefix(hs.URL, "http")+"/v1/twilio"+query)
}

// dialTwilioAt is dialTwilio to the server at url.
func dialTwilioAt(t *testing.T, h *harness, url string) *twilioSide {
	t.Helper()
	return dialTwilioWith(t, h, url, nil)
}

// dialTwilioWith is dialTwilioAt with the handshake's options (headers).
func dialTwilioWith(t *testing.T, h *harness, url string, opts *websocket.DialOptions) *twilioSide {
	t.Helper()
	conn, _, err := websocket.Dial(h.ctx, url, opts)
	require.NoError(t, err)
	t.Cleanup(func() { conn.CloseNow() })
	tw := &twilioSide{t: t, ctx: h.ctx, conn: conn, sid: "MZ0123456789abcdef", msgs: make(chan twilio.Message, 4096),
		done: make(chan struct{}), autoEcho: true}
	go tw.read()
	t.Cleanup(func() {
		conn.CloseNow()
		<-tw.done
	})
	return tw
}

// read receives the server's messages until the connection ends.
func (tw *twilioSide) read() {
	defer close(tw.done)
	defer close(tw.msgs)
	for {
		typ, b, err := tw.conn.Read(tw.ctx)
		if err != nil {
			tw.closeErr = err
			return
		}
		if typ != websocket.MessageText {
			tw.closeErr = errBinary
			return
		}
		var m twilio.Message
		if err := json.Unmarshal(b, &m); err != nil {
			tw.closeErr = err
			return
		}
		tw.mu.Lock()
		switch m.Event {
		case twilio.EventMedia:
			audio, err := base64.StdEncoding.DecodeString(m.Media.Payload)
			if err == nil && m.StreamSid == tw.sid {
				tw.media++
				tw.bytes += len(audio)
			}
		case twilio.EventMark:
			tw.pending = append(tw.pending, m.Mark.Name)
			if tw.autoEcho {
				tw.echoLocked()
			}
		case twilio.EventClear:
			tw.echoLocked() // Twilio echoes every pending mark on clear
		}
		tw.mu.Unlock()
		tw.msgs <- m
	}
}

var errBinary = &json.UnsupportedValueError{Str: "binary frame from the server"}

func (tw *twilioSide) echoLocked() {
	for _, name := range tw.pending {
		tw.send(map[string]any{"event": "mark", "streamSid": tw.sid, "mark": map[string]string{"name": name}})
	}
	tw.pending = nil
}

func (tw *twilioSide) setAutoEcho(on bool) {
	tw.mu.Lock()
	defer tw.mu.Unlock()
	tw.autoEcho = on
}

// send writes one message, numbering it (sequenceNumber is a string that
// counts from 1 at start); connected carries none.
func (tw *twilioSide) send(m map[string]any) {
	tw.sendMu.Lock()
	defer tw.sendMu.Unlock()
	if m["event"] != twilio.EventConnected {
		tw.seq++
		m["sequenceNumber"] = strconv.Itoa(tw.seq)
	}
	b, err := json.Marshal(m)
	require.NoError(tw.t, err)
	require.NoError(tw.t, tw.conn.Write(tw.ctx, websocket.MessageText, b))
}

func (tw *twilioSide) start(params map[string]string) {
	tw.send(map[string]any{"event": "connected", "protocol": "Call", "version": "1.0.0"})
	tw.send(map[string]any{"event": "start", "streamSid": tw.sid, "start": map[string]any{
		"accountSid": "AC0123", "streamSid": tw.sid, "callSid": "CA0123", "tracks": []string{"inbound"},
		"customParameters": params,
		"mediaFormat":      map[string]any{"encoding": "audio/x-mulaw", "sampleRate": 8000, "channels": 1},
	}})
}

// speak sends 8 kHz PCM as the caller's μ-law media, 20 ms a message.
func (tw *twilioSide) speak(pcm []int16, chunk *int) {
	for len(pcm) > 0 {
		f := pcm[:min(160, len(pcm))]
		pcm = pcm[len(f):]
		*chunk++
		tw.send(map[string]any{"event": "media", "streamSid": tw.sid, "media": map[string]string{
			"track": "inbound", "chunk": strconv.Itoa(*chunk), "timestamp": strconv.Itoa((*chunk - 1) * 20),
			"payload": base64.StdEncoding.EncodeToString(mulaw.AppendEncode(nil, f)),
		}})
	}
}

// next returns the next message that is not media.
func (tw *twilioSide) next() twilio.Message {
	tw.t.Helper()
	for m := range tw.msgs {
		if m.Event != twilio.EventMedia {
			return m
		}
	}
	tw.t.Fatalf("connection ended: %v", tw.closeErr)
	return twilio.Message{}
}

func (tw *twilioSide) mediaSoFar() int {
	tw.mu.Lock()
	defer tw.mu.Unlock()
	return tw.media
}

// TestTwilioCall holds a whole call: the greeting, two questions, the
// second spoken over the first answer (clear), and stop.
func TestTwilioCall(t *testing.T) {
	syn := flite(t)
	h := newHarness(t, &fakeStages{}, pipeline.Config{TTS: deadlineStage(roomy-time.Second, 0)},
		session.Config{Speech: syn, MaxBudget: roomy, Tokens: []string{"secret"}})
	tw := dialTwilio(t, h, "")
	tw.start(map[string]string{"token": "secret"})

	m := tw.next()
	require.Equal(t, twilio.EventMark, m.Event)
	require.Equal(t, "greeting", m.Mark.Name)
	require.Equal(t, tw.sid, m.StreamSid)
	require.Positive(t, tw.mediaSoFar(), "the greeting is spoken")

	pcm, _, ends := conversation(t, 800, "where is my order", "i want to return my shoes")
	pcm = downsample(t, pcm)
	split := ends[0]/2 + 8*700
	chunk := 0
	tw.setAutoEcho(false) // the first answer is still playing when the caller speaks again
	before := tw.mediaSoFar()
	tw.speak(pcm[:split], &chunk)
	m = tw.next()
	require.Equal(t, twilio.EventMark, m.Event, "%+v", m)
	require.Equal(t, "t-1", m.Mark.Name)
	require.Greater(t, tw.mediaSoFar(), before, "the first answer is spoken")

	tw.speak(pcm[split:], &chunk)
	m = tw.next()
	require.Equal(t, twilio.EventClear, m.Event, "barge-in clears the answer still playing: %+v", m)
	require.Equal(t, tw.sid, m.StreamSid)
	tw.setAutoEcho(true)
	before = tw.mediaSoFar()
	m = tw.next()
	require.Equal(t, twilio.EventMark, m.Event, "%+v", m)
	require.Equal(t, "t-2", m.Mark.Name)
	require.Greater(t, tw.mediaSoFar(), before, "the second answer is spoken")

	tw.send(map[string]any{"event": "stop", "streamSid": tw.sid, "stop": map[string]string{"accountSid": "AC0123", "callSid": "CA0123"}})
	for range tw.msgs {
	}
	<-tw.done
	require.Equal(t, websocket.StatusNormalClosure, websocket.CloseStatus(tw.closeErr), "%v", tw.closeErr)
}

func TestTwilioAuth(t *testing.T) {
	h := newHarness(t, &fakeStages{}, pipeline.Config{}, session.Config{Tokens: []string{"secret"}})
	hs := httptest.NewServer(http.HandlerFunc(h.srv.ServeTwilio))
	t.Cleanup(hs.Close)
	url := "ws" + strings.TrimPrefix(hs.URL, "http") + "/v1/twilio"

	_, resp, err := websocket.Dial(h.ctx, url+"?token=wrong", nil)
	require.Error(t, err)
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)

	// With the token in the query string no custom parameter is needed.
	tw := dialTwilio(t, h, "?token=secret")
	tw.start(nil)
	require.Empty(t, drainFor(tw, 300*time.Millisecond), "an authenticated call stays open")

	// Without one, the start message's custom parameter must carry it.
	tw = dialTwilio(t, h, "")
	tw.start(map[string]string{"token": "wrong"})
	for range tw.msgs {
	}
	<-tw.done
	require.Equal(t, websocket.StatusPolicyViolation, websocket.CloseStatus(tw.closeErr), "%v", tw.closeErr)
}

// TestTwilioTokenOnTokenlessServer: a server without tokens takes any
// call, also one whose URL carries a token (a number configured for a
// fleet, pointed at a loopback server); it was refused with 401.
func TestTwilioTokenOnTokenlessServer(t *testing.T) {
	h := newHarness(t, &fakeStages{}, pipeline.Config{}, session.Config{})
	hs := httptest.NewServer(http.HandlerFunc(h.srv.ServeTwilio))
	t.Cleanup(hs.Close)
	url := "ws" + strings.TrimPrefix(hs.URL, "http") + "/v1/twilio"
	for _, q := range []string{"?token=anything", "?access_token=anything"} {
		conn, resp, err := websocket.Dial(h.ctx, url+q, nil)
		require.NoError(t, err, q)
		require.Equal(t, http.StatusSwitchingProtocols, resp.StatusCode, q)
		conn.CloseNow()
	}
}

// TestTwilioStopCancelsTurnsInFlight: a call that ends (stop) has no one
// to answer and no resume: a turn being answered is cancelled at once,
// not run on to its deadline spending the LLM's time (and money) for an
// answer nobody can hear.
func TestTwilioStopCancelsTurnsInFlight(t *testing.T) {
	fake := &fakeStages{started: make(chan string, 8), generate: func(ctx context.Context, _ func(string)) (pipeline.Generation, error) {
		return blockUntilDone[pipeline.Generation](ctx)
	}}
	h := newHarness(t, fake, pipeline.Config{LLM: deadlineStage(roomy, 0)}, session.Config{MaxBudget: roomy})
	tw := dialTwilio(t, h, "")
	tw.start(nil)
	pcm, _, _ := conversation(t, 800, "where is my order")
	chunk := 0
	tw.speak(downsample(t, pcm), &chunk)
	for stage := range fake.started {
		if stage == pipeline.StageLLM {
			break
		}
	}
	llm := fake.contexts(pipeline.StageLLM)[0]
	stopped := time.Now()
	tw.send(map[string]any{"event": "stop", "streamSid": tw.sid, "stop": map[string]string{"accountSid": "AC0123", "callSid": "CA0123"}})
	waitCtxDone(t, llm, stopped, roomy/2)
	require.ErrorIs(t, context.Cause(llm), cancel.ClientDisconnect)
	for range tw.msgs {
	}
	<-tw.done
}

// drainFor returns the messages received within d (the call is silent).
func drainFor(tw *twilioSide, d time.Duration) []twilio.Message {
	timer := time.NewTimer(d)
	defer timer.Stop()
	var out []twilio.Message
	for {
		select {
		case m, ok := <-tw.msgs:
			if !ok {
				return append(out, twilio.Message{Event: "closed"})
			}
			out = append(out, m)
		case <-timer.C:
			return out
		}
	}
}

// TestTwilioUnauthenticatedCallTimesOut: with tokens configured, a call
// that brought no token and sends no start with one (only messages voiced
// ignores, which keep it from the idle reaper) is closed with 1008 after
// CallStartTimeout, and its session slot is free again.
func TestTwilioUnauthenticatedCallTimesOut(t *testing.T) {
	h := newHarness(t, &fakeStages{}, pipeline.Config{}, session.Config{Tokens: []string{"secret"}, MaxSessions: 1,
		CallStartTimeout: 200 * time.Millisecond})
	tw := dialTwilio(t, h, "")
	tw.sendMu.Lock()
	require.NoError(t, tw.conn.Write(h.ctx, websocket.MessageText, []byte(`{"event":"connected","protocol":"Call","version":"1.0.0"}`)))
	tw.sendMu.Unlock()
	for range tw.msgs {
	}
	<-tw.done
	require.Equal(t, websocket.StatusPolicyViolation, websocket.CloseStatus(tw.closeErr), "%v", tw.closeErr)

	// The slot is free: an authenticated call is admitted.
	require.Eventually(t, func() bool { return metricValue(t, h, "voiced_sessions") == 0 }, 5*time.Second, 5*time.Millisecond)
	tw = dialTwilio(t, h, "?token=secret")
	tw.start(nil)
	require.Empty(t, drainFor(tw, 300*time.Millisecond), "an authenticated call stays open")
}
