package session

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/pipeline"
	"github.com/voiced/voiced/internal/protocol"
)

// heldRunner stands in for the pipeline: once a request's final frame
// has arrived it says so on running, then answers when release is
// closed, or ends with the request.
type heldRunner struct {
	running chan<- struct{}
	release <-chan struct{}
}

func (r heldRunner) Run(ctx context.Context, req pipeline.Request, sink pipeline.Sink) {
	defer req.Audio.Close()
	select {
	case fctx := <-req.Final:
		r.running <- struct{}{}
		select {
		case <-r.release:
			sink.Transcript("where is my order", true)
			sink.Done(&pipeline.Result{Transcript: "where is my order", Answer: "It ships today."}, nil)
		case <-fctx.Done():
			sink.Done(nil, context.Cause(fctx))
		}
	case <-ctx.Done():
		sink.Done(nil, context.Cause(ctx))
	}
}

// TestDrainWaitsForOlderSessionsRequest: a drain closes the
// conversation's live session only once the requests of its older,
// cut-off sessions on this instance have ended too, their terminals
// delivered first. It closed the live session as soon as its own
// requests had ended: the older request's terminal was then kept, and
// reached the client only at its next resume.
func TestDrainWaitsForOlderSessionsRequest(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	running := make(chan struct{}, 1)
	release := make(chan struct{})
	srv := NewServer(Config{}, heldRunner{running: running, release: release}, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	hs := httptest.NewServer(srv)
	t.Cleanup(func() {
		require.NoError(t, srv.Close())
		hs.Close()
	})
	base := "ws" + strings.TrimPrefix(hs.URL, "http")

	c1, _, err := websocket.Dial(ctx, base, nil)
	require.NoError(t, err)
	defer c1.CloseNow()
	m, err := protocol.DecodeServer(readMsg(ctx, t, c1))
	require.NoError(t, err)
	var ready protocol.SessionReady
	require.NoError(t, m.As(&ready))
	b, err := protocol.EncodeBinaryAudio(nil, protocol.AudioHeader{
		RequestID: "r1", DeadlineAt: protocol.Millis(time.Now().Add(8 * time.Second)), Final: true,
	}, make([]int16, 320))
	require.NoError(t, err)
	require.NoError(t, c1.Write(ctx, websocket.MessageBinary, b))
	select {
	case <-running: // r1's final frame has arrived: it runs on
	case <-ctx.Done():
		t.Fatal("r1 never ran")
	}
	c1.CloseNow()

	c2, _, err := websocket.Dial(ctx, base+"/?resume="+url.QueryEscape(ready.ResumeToken), nil)
	require.NoError(t, err)
	defer c2.CloseNow()
	require.Equal(t, protocol.TypeSessionReady, readType(t, readMsg(ctx, t, c2)))
	live := srv.liveSession(ready.ConversationID)
	require.NotNil(t, live)

	srv.DrainNowForTest()
	require.Equal(t, protocol.TypeSessionDraining, readType(t, readMsg(ctx, t, c2)))
	// The linger is over: what the drain's timer does then.
	live.mu.Lock()
	live.lingerUntil = time.Time{}
	live.mu.Unlock()
	live.closeIfDrained()
	live.mu.Lock()
	closing := live.closing
	live.mu.Unlock()
	require.False(t, closing, "closed while the older session's r1 still runs")

	close(release)
	m, err = protocol.DecodeServer(readMsg(ctx, t, c2))
	require.NoError(t, err)
	require.Equal(t, protocol.TypeResult, m.Type, "r1's terminal, before the close: %s", m.Raw)
	require.Equal(t, "r1", m.RequestID)
	_, _, err = c2.Read(ctx)
	require.Equal(t, websocket.StatusServiceRestart, websocket.CloseStatus(err), "then the drain's close")
}
