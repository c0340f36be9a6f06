package main

import (
	"bytes"
	"context"
	"log/slog"
	"net/http/httptest"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/protocol"
)

// TestDrainCutShortBySignalSentBefore: two signals that came before the
// drain began (during the wait for Redis, say) are a first that starts
// the drain and a second that cuts it short. drain watched for signals
// sent after it began only, so the second waited, unread, while a request
// still streaming held the drain for all of -shutdown-timeout.
func TestDrainCutShortBySignalSentBefore(t *testing.T) {
	cfg, err := parseFlags([]string{"-stages", "sim", "-shutdown-timeout", "1m"}, func(string) string { return "" }, &bytes.Buffer{})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	logs := &syncBuf{}
	log := slog.New(slog.NewTextHandler(logs, nil))
	srv, stop, err := startSessions(ctx, cfg, log, prometheus.NewRegistry())
	require.NoError(t, err)
	defer stop(true)
	hs := httptest.NewServer(srv)
	defer hs.Close()

	conn, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(hs.URL, "http"), nil)
	require.NoError(t, err)
	defer conn.CloseNow()
	_, _, err = conn.Read(ctx) // session.ready
	require.NoError(t, err)
	frame, err := protocol.EncodeBinaryAudio(nil, protocol.AudioHeader{RequestID: "r1",
		DeadlineAt: protocol.Millis(time.Now().Add(time.Minute))}, make([]int16, 320))
	require.NoError(t, err)
	require.NoError(t, conn.Write(ctx, websocket.MessageBinary, frame)) // streaming: holds the drain
	require.NoError(t, conn.Write(ctx, websocket.MessageText, []byte(`{"type":"ping","clientTime":1}`)))
	for { // r1 is read once the pong is
		_, b, err := conn.Read(ctx)
		require.NoError(t, err)
		if m, err := protocol.DecodeServer(b); err == nil && m.Type == protocol.TypePong {
			break
		}
	}

	sigs := make(chan os.Signal, 2)
	sigs <- syscall.SIGTERM // the second of two, left waiting
	start := time.Now()
	stuck, err := drain(cfg, srv, hs.Config, sigs, log)
	require.False(t, stuck)
	require.NoError(t, err)
	require.Less(t, time.Since(start), 20*time.Second, "the drain ran its course despite the second signal")
	// The operator cut it short: the log says so, not that time ran out.
	require.Contains(t, logs.String(), "second signal: forcing exit")
	require.NotContains(t, logs.String(), "did not drain in time")
}
