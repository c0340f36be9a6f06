package session_test

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/pipeline"
	"github.com/voiced/voiced/internal/session"
	"github.com/voiced/voiced/internal/voicedtest"
)

// TestSlowClientCloseLoggedAsServers: 515bb5d logs a close the server
// sent, once the client answers it, as "session closed by the server"
// (naming 1008 for a slow client), not as the WebSocket library's read
// error. Two holes: the slow-client close is queued by sendLocked's
// kick, which never sets closeWith (teardown compared the echoed 1008
// with code 0); and when the writer's close handshake reads the echo (the
// reader parked, or between messages), the reader sees only the
// connection closed under it: "failed to get reader: use of closed
// network connection", at info level.
func TestSlowClientCloseLoggedAsServers(t *testing.T) {
	var logs voicedtest.LogBuffer
	reg := prometheus.NewRegistry()
	// The first piece of the answer is larger than the socket buffers: the
	// writer blocks in it, and the pieces after it overflow the queue (see
	// TestSlowClient; a client pinging until then could stall in TCP).
	fake := &fakeStages{generate: func(_ context.Context, emit func(string)) (pipeline.Generation, error) {
		emit(strings.Repeat("x", 200_000))
		for range session.MinOutboundQueue + 8 {
			emit("more.")
		}
		return pipeline.Generation{Provider: "fake"}, nil
	}}
	pl, err := pipeline.New(pipeline.Config{}, pipeline.Stages{STT: fake, Intent: fake, Retrieval: fake, LLM: fake}, pipeline.NewMetrics(reg))
	require.NoError(t, err)
	srv := session.NewServer(session.Config{OutboundQueue: session.MinOutboundQueue}, pl,
		slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo})), session.NewMetrics(reg))
	hs := httptest.NewUnstartedServer(srv)
	hs.Listener.Close()
	hs.Listener = smallSendListener(t)
	hs.Start()
	defer hs.Close()
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	h := &harness{t: t, ctx: ctx, srv: srv, http: hs, fake: fake, reg: reg}
	c := h.dialSmallWindow()
	c.audio("r1", 0, true, time.Now().Add(2*time.Second))
	require.Eventually(t, func() bool { return metricValue(t, h, "voiced_slow_client_closes_total") > 0 },
		testTimeout, time.Millisecond, "the server never gave up on a client that does not read")
	c.conn.SetReadLimit(-1) // the first piece
	// Read on: the close frame comes, and the client answers it (1008).
	var status websocket.StatusCode
	for {
		if _, _, err := c.conn.Read(h.ctx); err != nil {
			status = websocket.CloseStatus(err)
			break
		}
	}
	require.Equal(t, websocket.StatusPolicyViolation, status)
	require.NoError(t, srv.Close())
	out := logs.String()
	require.Contains(t, out, "session closed by the server",
		"the 1008 the server sent is logged as the library's read error:\n%s", out)
	require.NotContains(t, out, "failed to get reader", "the library's read error is logged for the server's own close:\n%s", out)
}
