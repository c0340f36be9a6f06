package session_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/pipeline"
	"github.com/voiced/voiced/internal/session"
	"github.com/voiced/voiced/internal/stages/tts"
	"github.com/voiced/voiced/internal/twilio"
	"github.com/voiced/voiced/internal/vad"
)

// gatedListener hands out connections whose writes, once armed, wait
// until the gate opens: what the server queues meanwhile stays queued.
type gatedListener struct {
	net.Listener
	armed atomic.Bool
	gate  chan struct{}
	once  sync.Once
}

func (l *gatedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &gatedConn{Conn: c, l: l}, nil
}

func (l *gatedListener) open() { l.once.Do(func() { close(l.gate) }) }

type gatedConn struct {
	net.Conn
	l *gatedListener
}

func (c *gatedConn) Write(p []byte) (int, error) {
	if c.l.armed.Load() {
		<-c.l.gate
	}
	return c.Conn.Write(p)
}

// queuedGreeting speaks a greeting of chunks chunks at once, then waits
// for the greeting to be stopped (the call's reader has returned).
type queuedGreeting struct {
	chunks  int
	emitted chan struct{} // closed once every chunk is queued
	stopped chan struct{} // closed once the greeting's context ends
}

func (*queuedGreeting) Name() string                          { return "queued" }
func (*queuedGreeting) Voices() []string                      { return []string{"v"} }
func (*queuedGreeting) SampleRates() []int                    { return []int{8000} }
func (*queuedGreeting) Estimate(string, int) time.Duration    { return time.Second }
func (*queuedGreeting) MinEstimate(string, int) time.Duration { return time.Second }
func (g *queuedGreeting) Synthesize(ctx context.Context, _ tts.Request, emit func([]int16)) (tts.Result, error) {
	for range g.chunks {
		emit(make([]int16, 160))
	}
	close(g.emitted)
	<-ctx.Done()
	close(g.stopped)
	return tts.Result{}, context.Cause(ctx)
}

// TestTwilioNothingWrittenAfterStop: once Twilio has sent stop, the stream
// is gone and nothing the server still had queued for it (here the
// greeting's media, which a slow write held back) may be written; the
// call closes with 1000 at once. The queue was flushed first: every
// chunk went out after stop.
func TestTwilioNothingWrittenAfterStop(t *testing.T) {
	syn := &queuedGreeting{chunks: 5, emitted: make(chan struct{}), stopped: make(chan struct{})}
	h := newHarness(t, &fakeStages{}, pipeline.Config{}, session.Config{Speech: syn, Detector: silentDetector})
	hs := httptest.NewUnstartedServer(http.HandlerFunc(h.srv.ServeTwilio))
	gl := &gatedListener{Listener: hs.Listener, gate: make(chan struct{})}
	hs.Listener = gl
	hs.Start()
	t.Cleanup(hs.Close)
	t.Cleanup(gl.open)
	tw := dialTwilioAt(t, h, "ws"+strings.TrimPrefix(hs.URL, "http")+"/v1/twilio")

	gl.armed.Store(true) // from here the server's writes wait: the upgrade is done
	tw.start(nil)
	<-syn.emitted // queued; the first chunk's write waits at the gate
	tw.send(map[string]any{"event": "stop", "streamSid": tw.sid, "stop": map[string]string{"accountSid": "AC0123", "callSid": "CA0123"}})
	<-syn.stopped // the reader has taken stop
	gl.open()

	media := 0
	for m := range tw.msgs {
		require.Equal(t, twilio.EventMedia, m.Event, "%+v", m)
		media++
	}
	<-tw.done
	require.Equal(t, websocket.StatusNormalClosure, websocket.CloseStatus(tw.closeErr), "%v", tw.closeErr)
	require.LessOrEqual(t, media, 1, "only the write under way when stop came may finish")
}

// TestTwilioCallKeepsNoMissedTerminals: a turn's mark that the call
// could not send (still queued at stop) is not kept for a resume, as a
// voiced.v1 client's terminal is: Twilio never resumes a call, so it
// would only be written to the conversation store for nobody.
func TestTwilioCallKeepsNoMissedTerminals(t *testing.T) {
	syn := flite(t)
	closed := make(chan struct{}) // the call's turn detector is closed: its reader took stop
	det := func(rate int) (vad.Detector, error) {
		d, err := vad.New(rate, vad.Options{})
		return closeSignal{d, closed}, err
	}
	h := newHarness(t, &fakeStages{}, pipeline.Config{TTS: deadlineStage(roomy-time.Second, 0)},
		session.Config{Speech: syn, MaxBudget: roomy, Greeting: "-", Detector: det})
	hs := httptest.NewUnstartedServer(http.HandlerFunc(h.srv.ServeTwilio))
	gl := &gatedListener{Listener: hs.Listener, gate: make(chan struct{})}
	hs.Listener = gl
	hs.Start()
	t.Cleanup(hs.Close)
	t.Cleanup(gl.open)
	tw := dialTwilioAt(t, h, "ws"+strings.TrimPrefix(hs.URL, "http")+"/v1/twilio")

	gl.armed.Store(true) // the answer's audio waits at the gate, its mark behind it
	tw.start(nil)
	pcm, _, _ := conversation(t, 800, "where is my order")
	chunk := 0
	tw.speak(downsample(t, pcm), &chunk)
	require.Eventually(t, func() bool { return metricValue(t, h, `voiced_requests_total{type="result"}`) == 1 },
		testTimeout, 5*time.Millisecond, "the turn is answered")
	tw.send(map[string]any{"event": "stop", "streamSid": tw.sid, "stop": map[string]string{"accountSid": "AC0123", "callSid": "CA0123"}})
	<-closed
	gl.open()
	for m := range tw.msgs {
		require.NotEqual(t, twilio.EventMark, m.Event, "the mark was queued behind the audio when stop came")
	}
	<-tw.done
	require.Eventually(t, func() bool { return metricValue(t, h, "voiced_sessions") == 0 }, testTimeout, 5*time.Millisecond)
	require.Zero(t, metricValue(t, h, "voiced_missed_terminals_total"))
}

// closeSignal is a detector that says when it is closed.
type closeSignal struct {
	vad.Detector
	closed chan struct{}
}

func (d closeSignal) Close() {
	d.Detector.Close()
	close(d.closed)
}
