package client_test

import (
	"bytes"
	"log/slog"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/client"
	"github.com/voiced/voiced/internal/protocol"
)

// lockedBuffer is a log sink written by the client's goroutine.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestResumeTokenNotInErrorsOrLogs: a reconnection whose dial fails in
// transport (the server resets the connection before answering the
// upgrade) must not carry the resume token, sent in the URL's query, into
// the client's error or its logs: net/http's errors quote the URL.
func TestResumeTokenNotInErrorsOrLogs(t *testing.T) {
	ctx := testCtx(t)
	const secret = "resume-secret-0123456789"
	f := newFake(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 0 {
			s := accept(t, w, r, map[string]any{"conversationId": "conv", "resumeToken": secret})
			if s != nil {
				s.serve(func(protocol.AudioHeader) bool { return false }) // drops on the first frame
			}
			return
		}
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			_ = conn.Close() // no answer to the upgrade at all
		}
	})
	var logs lockedBuffer
	var mu sync.Mutex
	var disconnects []error
	c, err := client.Dial(ctx, client.Config{URL: f.url(), Pings: 1, KeepAlive: -1,
		Logger:       slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		OnDisconnect: func(err error) { mu.Lock(); disconnects = append(disconnects, err); mu.Unlock() },
		Reconnect:    client.Reconnect{Initial: time.Millisecond, Max: 2 * time.Millisecond, Attempts: 2}})
	require.NoError(t, err)
	defer c.CloseNow()
	r, err := c.Open("r1", nil)
	require.NoError(t, err)
	require.NoError(t, r.Send(ctx, client.Frame{PCM: tone(1)[0], Final: true}))
	select {
	case <-c.Done():
	case <-ctx.Done():
		t.Fatal("the client never gave up")
	}
	_, rerr := r.Wait(ctx)
	require.ErrorIs(t, c.Err(), client.ErrConnectionLost)
	require.Len(t, f.requests(), 3, "one connection and two failed resumes")
	require.Equal(t, secret, f.requests()[1].URL.Query().Get("resume"), "the resume did present the token")
	for _, s := range []string{c.Err().Error(), rerr.Error(), logs.String()} {
		require.NotContains(t, s, secret)
	}
	require.Contains(t, logs.String(), "reconnect attempt failed")
}
