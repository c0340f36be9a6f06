package session

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/pipeline"
)

// gateServer is a server whose sessions are only built, never served:
// for tests of one request's terminal gate.
func gateServer(t *testing.T, cfg Config, log *slog.Logger) *Session {
	t.Helper()
	srv := NewServer(cfg, drainRunner{}, log, nil)
	t.Cleanup(func() { require.NoError(t, srv.Close()) })
	return newSession(srv, "s1", log)
}

// TestCutSaveBeforeSaveStarts: a same-id replacement cuts the history
// save the old request's result waits for (cutSave), so that the reader
// does not wait for that save. The request's pipeline may decide the
// result just after the reader looked: the save then starts after the
// cut was asked for, and must start cut, not run for the old request's
// whole budget with the reader waiting on it.
func TestCutSaveBeforeSaveStarts(t *testing.T) {
	s := gateServer(t, Config{}, slog.New(slog.DiscardHandler))
	r := &request{s: s, id: "a"}
	r.cutSave() // the reader, replacing a: no save runs yet

	var saveCut bool
	r.mu.Lock()
	// The pipeline's Done wins the gate now and saves, bounded by a
	// deadline far off.
	r.settle(func(ctx context.Context) { saveCut = ctx.Err() != nil }, time.Now().Add(time.Hour))
	r.mu.Unlock()
	require.True(t, saveCut, "a save that starts after the cut ran uncut")
}

// TestNoAnsweredLogForALostResult: with -log-transcripts, a result that
// lost the terminal gate (the request was cancelled, replaced or ended at
// its deadline just before it) was never sent: it is not logged as
// answered.
func TestNoAnsweredLogForALostResult(t *testing.T) {
	var (
		mu  sync.Mutex
		buf bytes.Buffer
	)
	log := slog.New(slog.NewTextHandler(lockedWriter{&mu, &buf}, nil))
	s := gateServer(t, Config{LogTranscripts: true}, log)
	r := &request{s: s, id: "a", log: log, finalAt: time.Now(), deadline: time.Now().Add(time.Second)}
	r.ended = true // its terminal (cancelled) is out already

	r.Done(&pipeline.Result{Transcript: "where is my order", Answer: "It ships today."}, nil)
	mu.Lock()
	defer mu.Unlock()
	require.False(t, strings.Contains(buf.String(), "answered"), "logged: %s", buf.String())
}

type lockedWriter struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}
