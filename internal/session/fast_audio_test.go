package session_test

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/pipeline"
	"github.com/voiced/voiced/internal/protocol"
	"github.com/voiced/voiced/internal/session"
)

// frameBytes is the PCM of one frame the test client sends (20 ms at 16 kHz).
const frameBytes = 320 * 2

// gatedWrite returns a recognizer Write that blocks until open is closed,
// like a recognizer that has fallen far behind.
func gatedWrite(open <-chan struct{}) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		select {
		case <-open:
			return nil
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

// TestAudioFasterThanRealTime: a whole recorded utterance sent at once to
// an idle server is queued for the recognizer, however far behind it is,
// and answered; nothing is refused and the queued audio is given back.
func TestAudioFasterThanRealTime(t *testing.T) {
	open := make(chan struct{})
	fake := &fakeStages{write: gatedWrite(open)}
	h := newHarness(t, fake, pipeline.Config{}, session.Config{})
	c := h.dial()
	const frames = 225 // 4.5 s, as one burst
	dl := time.Now().Add(5 * time.Second)
	for seq := range int64(frames - 1) {
		c.audio("r1", seq, false, dl)
	}
	// Everything sent so far waits for the recognizer: the session is
	// alive and the audio is buffered, not refused.
	require.Empty(t, c.ping())
	// The recognizer holds at most a batch of 16 frames; the rest waits.
	require.InDelta(t, (frames-1)*frameBytes, metricValue(t, h, "voiced_buffered_audio_bytes"), 16*frameBytes)
	close(open)
	c.audio("r1", frames-1, true, time.Now().Add(1700*time.Millisecond))
	term, _ := c.terminal("r1")
	res := resultOf(t, term)
	require.Equal(t, "where is my order", res.Transcript)
	require.EqualValues(t, 0, metricValue(t, h, "voiced_buffered_audio_bytes"))
	require.EqualValues(t, 0, overloaded(t, h))
}

// TestBufferedAudioBudget: past the server-wide budget of buffered audio a
// request ends with overloaded, counted under its own cause and not as a
// cancellation; its audio is given back, and the session goes on.
func TestBufferedAudioBudget(t *testing.T) {
	open := make(chan struct{})
	fake := &fakeStages{write: gatedWrite(open)}
	h := newHarness(t, fake, pipeline.Config{}, session.Config{MaxBufferedAudio: 10 * frameBytes})
	c := h.dial()
	dl := time.Now().Add(5 * time.Second)
	var term protocol.ServerMessage
	for seq := int64(0); ; seq++ {
		require.Less(t, seq, int64(40), "the budget of 10 frames was never enforced")
		c.audio("r1", seq, false, dl)
		if msgs := c.ping(); len(msgs) > 0 {
			term = msgs[0]
			break
		}
	}
	e := errorOf(t, term)
	require.Equal(t, "r1", e.RequestID)
	require.Equal(t, protocol.CodeOverloaded, e.Code)
	require.Contains(t, e.Message, "buffer for audio")
	require.EqualValues(t, 1, metricValue(t, h, `voiced_overloaded_total{cause="audio_buffer_full"}`))
	require.EqualValues(t, 1, overloaded(t, h))
	require.EqualValues(t, 0, metricValue(t, h, "voiced_cancellations_total"))
	require.EqualValues(t, 0, metricValue(t, h, "voiced_requests_in_flight"))
	close(open)
	// The ended request's queue is dropped when its pipeline stops.
	require.Eventually(t, func() bool { return metricValue(t, h, "voiced_buffered_audio_bytes") == 0 },
		testTimeout, time.Millisecond)
	c.audio("r2", 0, true, time.Now().Add(1700*time.Millisecond))
	term, _ = c.terminal("r2")
	resultOf(t, term)
}

// TestOverloadCauses: each overload has its own cause and message.
func TestOverloadCauses(t *testing.T) {
	t.Run("in-flight limit", func(t *testing.T) {
		fake := &fakeStages{started: make(chan string, 8), finish: blockUntilDone[string]}
		h := newHarness(t, fake, pipeline.Config{}, session.Config{MaxInFlight: 1})
		c := h.dial()
		dl := time.Now().Add(5 * time.Second)
		c.audio("r1", 0, true, dl)
		<-fake.started
		c.audio("r2", 0, true, dl)
		term, _ := c.terminal("r2")
		requireOverloaded(t, h, term, "in_flight_limit", "limit 1")
	})
	t.Run("no recognizer", func(t *testing.T) {
		fake := &fakeStages{start: func(context.Context) error { return pipeline.ErrNoRecognizer }}
		h := newHarness(t, fake, pipeline.Config{}, session.Config{})
		c := h.dial()
		c.audio("r1", 0, true, time.Now().Add(5*time.Second))
		term, _ := c.terminal("r1")
		requireOverloaded(t, h, term, "no_recognizer", "no speech recognizer")
	})
}

// requireOverloaded checks a terminal message is overloaded with a message
// saying why, counted once under cause and not as a cancellation.
func requireOverloaded(t *testing.T, h *harness, term protocol.ServerMessage, cause, says string) {
	t.Helper()
	e := errorOf(t, term)
	require.Equal(t, protocol.CodeOverloaded, e.Code)
	require.Contains(t, e.Message, says)
	require.EqualValues(t, 1, metricValue(t, h, `voiced_overloaded_total{cause="`+cause+`"}`))
	require.EqualValues(t, 1, overloaded(t, h))
	require.EqualValues(t, 0, metricValue(t, h, "voiced_cancellations_total"))
}

// overloaded is the sum of voiced_overloaded_total over its causes.
func overloaded(t *testing.T, h *harness) float64 {
	t.Helper()
	return metricValue(t, h, "voiced_overloaded_total")
}

// TestReuseIdAfterTerminal: a client that has a request's terminal message
// may reuse its id at once; the registry has let it go before the message
// was sent.
func TestReuseIdAfterTerminal(t *testing.T) {
	h := newHarness(t, &fakeStages{}, pipeline.Config{}, session.Config{})
	c := h.dial()
	for range 20 {
		c.audio("r1", 0, true, time.Now().Add(2*time.Second))
		term, _ := c.terminal("r1")
		resultOf(t, term)
	}
	require.EqualValues(t, 20, metricValue(t, h, `voiced_requests_total{type="result"}`))
	require.EqualValues(t, 0, metricValue(t, h, "voiced_cancellations_total"))
}

// load is a Saturation a test switches.
type load struct{ on atomic.Bool }

func (l *load) Saturated() bool { return l.on.Load() }

// TestSaturationSheds: while the process is saturated, new requests are
// refused with overloaded (cause saturated) and new sessions with 503 and
// Retry-After; a request accepted before goes on and is answered.
func TestSaturationSheds(t *testing.T) {
	l := &load{}
	fake := &fakeStages{started: make(chan string, 8)}
	release := make(chan struct{})
	fake.finish = func(ctx context.Context) (string, error) {
		<-release
		return "where is my order", nil
	}
	h := newHarness(t, fake, pipeline.Config{}, session.Config{Load: l})
	c := h.dial()
	c.audio("r1", 0, true, time.Now().Add(5*time.Second))
	<-fake.started
	l.on.Store(true)
	require.True(t, h.srv.Saturated())

	start := time.Now()
	c.audio("r2", 0, true, time.Now().Add(5*time.Second))
	term, _ := c.terminal("r2")
	require.Less(t, time.Since(start), time.Second, "refused at once")
	e := errorOf(t, term)
	require.Equal(t, protocol.CodeOverloaded, e.Code)
	require.Contains(t, e.Message, "saturated")
	require.EqualValues(t, 1, metricValue(t, h, `voiced_overloaded_total{cause="saturated"}`))
	// The writer measures the refusal after writing it, so the metric may
	// lag the message read.
	require.Eventually(t, func() bool { return metricValue(t, h, "voiced_refusal_seconds") == 1 },
		testTimeout, time.Millisecond, "the refusal's time from its frame read to written")

	_, resp, err := websocket.Dial(h.ctx, "ws"+strings.TrimPrefix(h.http.URL, "http"), nil)
	require.Error(t, err)
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	require.Equal(t, "1", resp.Header.Get("Retry-After"))
	require.EqualValues(t, 1, metricValue(t, h, `voiced_session_upgrades_total{outcome="refused_saturated"}`))

	close(release)
	term, _ = c.terminal("r1")
	resultOf(t, term)

	l.on.Store(false)
	c.audio("r3", 0, true, time.Now().Add(5*time.Second))
	term, _ = c.terminal("r3")
	resultOf(t, term)
}

// limitedLoad is a saturated Saturation that keeps a limit on the
// requests in flight, as *saturation.Monitor does while it sheds.
type limitedLoad struct {
	load
	limit int
}

func (l *limitedLoad) AdmitRequest(inFlight int) bool { return !l.on.Load() || inFlight < l.limit }

// TestSaturationLimit: while saturated, a Saturation that keeps a limit on
// the requests in flight has new requests taken up to it and refused
// (overloaded, cause saturated) past it, whatever session they come from;
// new sessions are still refused.
func TestSaturationLimit(t *testing.T) {
	fake := &fakeStages{started: make(chan string, 8)}
	release := make(chan struct{})
	fake.finish = func(ctx context.Context) (string, error) {
		<-release
		return "where is my order", nil
	}
	l := &limitedLoad{limit: 2}
	h := newHarness(t, fake, pipeline.Config{}, session.Config{Load: l})
	a, b := h.dial(), h.dial()
	l.on.Store(true)
	deadline := time.Now().Add(5 * time.Second)
	started := func(id string) {
		t.Helper()
		select {
		case <-fake.started:
		case <-h.ctx.Done():
			t.Fatalf("%s did not start", id)
		}
	}
	a.audio("r1", 0, true, deadline)
	started("r1")
	b.audio("r2", 0, true, deadline)
	started("r2") // saturated, but within the limit
	b.audio("r3", 0, true, deadline)
	term, _ := b.terminal("r3")
	e := errorOf(t, term)
	require.Equal(t, protocol.CodeOverloaded, e.Code)
	require.Contains(t, e.Message, "saturated")

	_, resp, err := websocket.Dial(h.ctx, "ws"+strings.TrimPrefix(h.http.URL, "http"), nil)
	require.Error(t, err)
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)

	close(release)
	for _, c := range []struct {
		cl *client
		id string
	}{{a, "r1"}, {b, "r2"}} {
		term, _ = c.cl.terminal(c.id)
		resultOf(t, term)
	}
}

// TestIdleTimeout: a client that upgrades and sends nothing, or trickles
// a frame a byte at a time, is closed after the idle timeout with 1001,
// and nothing of its session is left; one that keeps pinging stays.
func TestIdleTimeout(t *testing.T) {
	const idle = 300 * time.Millisecond
	t.Run("silent", func(t *testing.T) {
		h := newHarness(t, &fakeStages{}, pipeline.Config{}, session.Config{IdleTimeout: idle})
		start := time.Now()
		c := h.dial()
		_, _, err := c.conn.Read(h.ctx)
		require.Equal(t, websocket.StatusGoingAway, websocket.CloseStatus(err), "%v", err)
		require.GreaterOrEqual(t, time.Since(start), idle)
		require.Eventually(t, func() bool { return h.srv.Sessions() == 0 }, testTimeout, time.Millisecond)
		require.EqualValues(t, 1, metricValue(t, h, "voiced_idle_closes_total"))
	})
	t.Run("trickle", func(t *testing.T) {
		h := newHarness(t, &fakeStages{}, pipeline.Config{}, session.Config{IdleTimeout: idle})
		c := h.dial()
		frame, err := protocol.EncodeBinaryAudio(nil, protocol.AudioHeader{RequestID: "r1",
			DeadlineAt: protocol.Millis(time.Now().Add(time.Minute))}, make([]int16, 320))
		require.NoError(t, err)
		w, err := c.conn.Writer(h.ctx, websocket.MessageBinary)
		require.NoError(t, err)
		closed := make(chan error, 1)
		go func() {
			_, _, err := c.conn.Read(h.ctx)
			closed <- err
		}()
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			require.Less(t, i, len(frame), "the trickled frame was never cut off")
			select {
			case err := <-closed:
				require.Equal(t, websocket.StatusGoingAway, websocket.CloseStatus(err), "%v", err)
				require.Eventually(t, func() bool { return h.srv.Sessions() == 0 }, testTimeout, time.Millisecond)
				return
			case <-tick.C:
				// One byte of one frame, flushed: the message never ends.
				if _, err := w.Write(frame[i : i+1]); err != nil {
					require.Eventually(t, func() bool { return h.srv.Sessions() == 0 }, testTimeout, time.Millisecond)
					return
				}
			}
		}
	})
	t.Run("pinging", func(t *testing.T) {
		h := newHarness(t, &fakeStages{}, pipeline.Config{}, session.Config{IdleTimeout: idle})
		c := h.dial()
		deadline := time.Now().Add(3 * idle)
		for time.Now().Before(deadline) {
			require.Empty(t, c.ping())
			timer := time.NewTimer(idle / 4)
			<-timer.C
		}
		require.Equal(t, 1, h.srv.Sessions())
	})
}

// TestConnectionStorm: a burst of connection attempts far over
// -max-sessions is answered, each with 101 or 503 and Retry-After, never
// more sessions than the limit, and nothing left behind once the accepted
// ones close.
func TestConnectionStorm(t *testing.T) {
	const limit, attempts, dialers = 50, 1000, 32
	h := newHarness(t, &fakeStages{}, pipeline.Config{}, session.Config{MaxSessions: limit})
	addr := strings.TrimPrefix(h.http.URL, "http://")
	handshake := "GET / HTTP/1.1\r\nHost: " + addr + "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
	var (
		mu       sync.Mutex
		accepted []net.Conn
		codes    = map[int]int{}
		most     atomic.Int64
	)
	next := atomic.Int64{}
	var wg sync.WaitGroup
	for range dialers {
		wg.Go(func() {
			for next.Add(1) <= attempts {
				conn, err := net.DialTimeout("tcp", addr, testTimeout)
				if !assert.NoError(t, err) {
					return
				}
				conn.SetDeadline(time.Now().Add(testTimeout))
				_, err = io.WriteString(conn, handshake)
				if !assert.NoError(t, err) {
					return
				}
				resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
				if !assert.NoError(t, err) {
					return
				}
				most.Store(max(most.Load(), int64(h.srv.Sessions())))
				mu.Lock()
				codes[resp.StatusCode]++
				if resp.StatusCode == http.StatusSwitchingProtocols {
					accepted = append(accepted, conn)
				} else {
					assert.Equal(t, "1", resp.Header.Get("Retry-After"))
					conn.Close()
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	require.Equal(t, attempts, codes[http.StatusSwitchingProtocols]+codes[http.StatusServiceUnavailable], "codes %v", codes)
	require.Equal(t, limit, codes[http.StatusSwitchingProtocols], "the accepted sessions stayed open: exactly the limit")
	require.LessOrEqual(t, most.Load(), int64(limit))
	for _, c := range accepted {
		c.Close()
	}
	require.Eventually(t, func() bool { return h.srv.Sessions() == 0 }, testTimeout, time.Millisecond)
}

// laggedLoad is a Saturation that has lately run lag late.
type laggedLoad struct {
	load
	lag time.Duration
}

func (l *laggedLoad) Lag() time.Duration { return l.lag }

// TestTerminalMarginFollowsLag: a request gives up TerminalMargin plus
// twice the process's recent lag before its deadline, at most
// MaxTerminalMargin, so that a starved process answers early rather than
// late; the recogniser's budget ends that much (and the reserve) earlier.
func TestTerminalMarginFollowsLag(t *testing.T) {
	const reserve = 100 * time.Millisecond
	for _, c := range []struct {
		name       string
		load       session.Saturation
		max        time.Duration
		wantMargin time.Duration
	}{
		{"no lag", &laggedLoad{}, 0, 10 * time.Millisecond},
		{"a Load without lag", &load{}, 0, 10 * time.Millisecond},
		{"lag", &laggedLoad{lag: 60 * time.Millisecond}, 0, 130 * time.Millisecond},
		{"lag past the cap", &laggedLoad{lag: time.Second}, 0, 300 * time.Millisecond},
		{"a lower cap", &laggedLoad{lag: time.Second}, 50 * time.Millisecond, 50 * time.Millisecond},
		{"growth off", &laggedLoad{lag: time.Second}, -1, 10 * time.Millisecond},
	} {
		t.Run(c.name, func(t *testing.T) {
			sttEnds := make(chan time.Time, 1)
			fake := &fakeStages{finish: func(ctx context.Context) (string, error) {
				dl, ok := ctx.Deadline()
				require.True(t, ok)
				sttEnds <- dl
				return "where is my order", nil
			}}
			h := newHarness(t, fake, pipeline.Config{Reserve: reserve},
				session.Config{Load: c.load, MaxTerminalMargin: c.max})
			cl := h.dial()
			deadline := time.Now().Add(time.Second).Truncate(time.Millisecond) // within the STT cap
			cl.audio("r1", 0, true, deadline)
			var end time.Time
			select {
			case end = <-sttEnds:
			case <-h.ctx.Done():
				t.Fatal("the recogniser did not finish")
			}
			require.InDelta(t, c.wantMargin+reserve, deadline.Sub(end), float64(15*time.Millisecond),
				"the recogniser's budget ends %v before the deadline", deadline.Sub(end))
			term, _ := cl.terminal("r1")
			resultOf(t, term)
		})
	}
}
