package session_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/pipeline"
	"github.com/voiced/voiced/internal/protocol"
	"github.com/voiced/voiced/internal/session"
	"github.com/voiced/voiced/internal/vad"
)

// countingHandler counts the log records at Warn and above, and the bytes
// of their messages and attributes.
type countingHandler struct {
	mu    sync.Mutex
	warns int
	bytes int
}

func (c *countingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (c *countingHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Level < slog.LevelWarn {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.warns++
	c.bytes += len(r.Message)
	r.Attrs(func(a slog.Attr) bool {
		c.bytes += len(a.Key) + len(a.Value.String())
		return true
	})
	return nil
}
func (c *countingHandler) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c *countingHandler) WithGroup(string) slog.Handler      { return c }

func (c *countingHandler) counts() (warns, bytes int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.warns, c.bytes
}

// newLogHarness is newHarness with a logger that counts warnings.
func newLogHarness(t *testing.T, fake *fakeStages, pcfg pipeline.Config, scfg session.Config) (*harness, *countingHandler) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	reg := prometheus.NewRegistry()
	pl, err := pipeline.New(pcfg, pipeline.Stages{STT: fake, Intent: fake, Retrieval: fake, LLM: fake}, pipeline.NewMetrics(reg))
	require.NoError(t, err)
	logs := &countingHandler{}
	srv := session.NewServer(scfg, pl, slog.New(logs), session.NewMetrics(reg))
	hs := httptest.NewServer(srv)
	t.Cleanup(func() {
		require.NoError(t, srv.Close())
		hs.Close()
	})
	return &harness{t: t, ctx: ctx, srv: srv, http: hs, fake: fake, reg: reg}, logs
}

// TestShortDeadlineNotWarnedPerRequest: a request whose deadlineAt leaves
// no time to start transcribing ends with deadline_exceeded, an expected
// outcome of the client's own input (protocol.md, error codes). A client
// that sends such requests in a loop must not write one warning per
// request to the server's log.
func TestShortDeadlineNotWarnedPerRequest(t *testing.T) {
	const n = 40
	h, logs := newLogHarness(t, &fakeStages{}, pipeline.Config{}, session.Config{})
	c := h.dial()
	for i := range n {
		id := fmt.Sprintf("r%d", i)
		// After arrival (so not refused at once), but within the
		// pipeline's 100 ms reserve: no time left to start STT.
		c.audio(id, 0, true, time.Now().Add(60*time.Millisecond))
		term, _ := c.terminal(id)
		require.Equal(t, protocol.CodeDeadlineExceeded, errorOf(t, term).Code)
	}
	warns, _ := logs.counts()
	require.LessOrEqual(t, warns, 1, "%d requests with a short deadline wrote %d warnings", n, warns)
}

// TestServerTurnsUnavailableNotWarnedPerUpdate: on a server whose voice
// activity detector cannot be made (a build without cgo), every
// session.update asking for server turns is a bad_message and the session
// stays open; a client repeating it must not write a warning each time.
func TestServerTurnsUnavailableNotWarnedPerUpdate(t *testing.T) {
	const n = 50
	h, logs := newLogHarness(t, &fakeStages{}, pipeline.Config{}, session.Config{
		Detector: func(int) (vad.Detector, error) { return nil, errors.New("no detector in this build") },
	})
	c := h.dial()
	for range n {
		c.sendText(`{"type":"session.update","turnDetection":{"mode":"server"}}`)
	}
	msgs := c.ping()
	require.Len(t, msgs, n)
	for _, m := range msgs {
		require.Equal(t, protocol.CodeBadMessage, errorOf(t, m).Code)
	}
	warns, _ := logs.counts()
	require.LessOrEqual(t, warns, 1, "%d refused updates wrote %d warnings", n, warns)
}

// TestTwilioBadMessagesLogBounded: a phone call with tokens configured is
// upgraded before it authenticates (in its start message). Until then
// nothing of it should cost the server more than the call itself: a
// caller that never authenticates, sending malformed messages as fast as
// it can, must not write a warning per message, let alone one that
// carries a field of its message whole.
func TestTwilioBadMessagesLogBounded(t *testing.T) {
	const n = 200
	h, logs := newLogHarness(t, &fakeStages{}, pipeline.Config{}, session.Config{Tokens: []string{"secret"}})
	hs := httptest.NewServer(http.HandlerFunc(h.srv.ServeTwilio))
	t.Cleanup(hs.Close)
	conn, _, err := websocket.Dial(h.ctx, "ws"+strings.TrimPrefix(hs.URL, "http")+"/v1/twilio", nil)
	require.NoError(t, err)
	t.Cleanup(func() { conn.CloseNow() })
	conn.SetReadLimit(-1)
	// The first bad message, the one logged at warning level, and every
	// 40th carry a 100 KB field (well under -max-message-bytes); the rest
	// are small. Five big ones show the field is not logged whole
	// without 10 MB to write, mask and parse under -race, which outlasted
	// the test's timeout on a busy machine.
	big := strings.Repeat("9x", 50_000)
	for i := range n {
		msg := `{}` // no event
		if i%40 == 0 {
			msg = `{"event":"media","streamSid":"MZ1","sequenceNumber":"` + big + `"}`
		}
		require.NoError(t, conn.Write(h.ctx, websocket.MessageText, []byte(msg)))
	}
	// stop is read after every message above, and closes the call.
	stop, _ := json.Marshal(map[string]any{"event": "stop", "streamSid": "MZ1", "sequenceNumber": "2",
		"stop": map[string]string{"accountSid": "AC1", "callSid": "CA1"}})
	require.NoError(t, conn.Write(h.ctx, websocket.MessageText, stop))
	_, _, err = conn.Read(h.ctx)
	require.Equal(t, websocket.StatusNormalClosure, websocket.CloseStatus(err), "%v", err)
	warns, bytes := logs.counts()
	require.LessOrEqual(t, warns, 1, "%d bad messages from an unauthenticated call wrote %d warnings", n, warns)
	require.Less(t, bytes, 4096, "an unauthenticated call wrote %d bytes of warnings", bytes)
}

// TestIdleCloseCountedOnce: a client that upgrades, then neither sends
// nor reads (nor answers the close), is closed once for idleness and
// counted once in voiced_idle_closes_total, however long the close
// handshake waits for it.
func TestIdleCloseCountedOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out coder/websocket's 5 s close handshake")
	}
	const idle = 200 * time.Millisecond
	h := newHarness(t, &fakeStages{}, pipeline.Config{}, session.Config{IdleTimeout: idle})
	// A client that reads nothing after session.ready: the server's close
	// frame is never answered, so the handshake runs its full 5 s.
	c := h.dial()
	_ = c
	require.Eventually(t, func() bool { return h.srv.Sessions() == 0 }, testTimeout, 5*time.Millisecond)
	require.EqualValues(t, 1, metricValue(t, h, "voiced_idle_closes_total"))
}

// TestSlowClientMissedBounded: a client that stops reading is closed with
// 1008 once -outbound-queue messages pile up, and the terminals it did
// not get are kept for a resume: "the last 16 per conversation"
// (protocol.md, Resume). Until its connection is actually gone (the
// blocked write runs out its -write-timeout) the session still reads;
// what a client that keeps sending makes it keep must stay within that
// bound, not grow with every frame.
func TestSlowClientMissedBounded(t *testing.T) {
	// Each answer is one big piece: the writer blocks in the middle of
	// writing it, so the queue's overflow (the 1008 kick) finds the
	// writer busy and the reader still reading, for the blocked write's
	// timeout. (A writer that is not blocked sends the close at once, and
	// coder/websocket's close handshake then takes over the reading.)
	fake := &fakeStages{generate: func(_ context.Context, emit func(string)) (pipeline.Generation, error) {
		emit(strings.Repeat("x", 200_000))
		return pipeline.Generation{}, nil
	}}
	// A queue of 8 is raised to MinOutboundQueue: at 8, the resume below
	// was closed with 1008 while it replayed the 16 kept terminals.
	h := newHarness(t, fake, pipeline.Config{}, session.Config{WriteTimeout: 4 * time.Second, OutboundQueue: 8})
	c := h.dialSmallWindow()
	for i := 0; metricValue(t, h, "voiced_slow_client_closes_total") == 0; i++ {
		require.Less(t, i, 1000, "the queue never filled")
		c.audio(fmt.Sprintf("r%d", i), 0, true, time.Now().Add(2*time.Second))
		if i > 0 {
			// One request at a time (-max-in-flight), each after the last
			// one's turn has been queued.
			require.Eventually(t, func() bool { return h.srv.InFlight() == 0 }, testTimeout, time.Millisecond)
		}
	}
	// The session is closing (1008) but still reads: each refused
	// request's terminal is kept for a resume, the last MaxMissed of them.
	refused := func() float64 { return metricValue(t, h, `voiced_requests_total{code="deadline_exceeded"}`) }
	const n = 1000
	past := time.Now().Add(-time.Second)
	for i := range n {
		b, err := protocol.EncodeBinaryAudio(nil, protocol.AudioHeader{RequestID: fmt.Sprintf("x%d", i),
			DeadlineAt: protocol.Millis(past), Final: true}, nil)
		require.NoError(t, err)
		if c.conn.Write(h.ctx, websocket.MessageBinary, b) != nil {
			break // the server has cut the connection
		}
	}
	require.Eventually(t, func() bool { return h.srv.Sessions() == 0 }, testTimeout, 5*time.Millisecond)
	require.Greater(t, refused(), float64(session.MaxMissed), "the closing session read too few requests to test the bound")
	// The conversation kept the last MaxMissed terminals, no more: a
	// resume replays exactly those.
	c2 := h.dialResume(c.ready.ResumeToken)
	c2.conn.SetReadLimit(-1) // the results carry the big answers
	replayed := c2.ping()
	require.Len(t, replayed, session.MaxMissed, "a client that stopped reading made its session keep %d terminals", len(replayed))
}
