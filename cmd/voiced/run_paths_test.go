package main

import (
	"bytes"
	"context"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// logBuffer collects voiced's log and closes ready at "voiced ready".
type logBuffer struct {
	mu    sync.Mutex
	b     bytes.Buffer
	ready chan struct{}
	once  sync.Once
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if bytes.Contains(p, []byte(`"msg":"voiced ready"`)) {
		l.once.Do(func() { close(l.ready) })
	}
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestSignalDrains: a SIGINT once voiced is ready drains and stops it,
// run returning nil with the drain and the stop logged. (The fleet tests
// signal a voiced process too, but their coverage is not this one's.)
func TestSignalDrains(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	log := &logBuffer{ready: make(chan struct{})}
	errc := make(chan error, 1)
	go func() {
		errc <- run(ctx, []string{"-addr", "127.0.0.1:0", "-admin-addr", "127.0.0.1:0", "-log-format", "json", "-stages", "sim"},
			func(string) string { return "" }, &bytes.Buffer{}, log)
	}()
	select {
	case <-log.ready:
	case err := <-errc:
		t.Fatalf("voiced exited before ready: %v\n%s", err, log)
	case <-ctx.Done():
		t.Fatal("voiced not ready in time")
	}
	// run's handler has the signal from before "voiced ready" on, so the
	// default one (exit) does not.
	require.NoError(t, syscall.Kill(syscall.Getpid(), syscall.SIGINT))
	select {
	case err := <-errc:
		require.NoError(t, err)
	case <-time.After(testTimeout):
		t.Fatal("voiced did not stop on SIGINT")
	}
	require.Nil(t, ctx.Err(), "stopped by the signal, not the test's deadline")
	out := log.String()
	require.Contains(t, out, `"msg":"draining: finishing in-flight requests","signal":"interrupt"`)
	require.Contains(t, out, `"msg":"voiced stopped"`)
}

// TestAgentAddrInUse: a fleet that cannot start (its HAProxy agent's
// address taken) fails run after the session listener opened, which is
// closed again.
func TestAgentAddrInUse(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer taken.Close()
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	var log bytes.Buffer
	err = run(ctx, []string{"-addr", "127.0.0.1:0", "-admin-addr", "off", "-stages", "sim", "-haproxy-agent-addr", taken.Addr().String()},
		func(string) string { return "" }, &bytes.Buffer{}, &log)
	require.ErrorContains(t, err, "listen on -haproxy-agent-addr")
	require.Equal(t, 1, exitStatus(err))
	require.False(t, strings.Contains(log.String(), "voiced listening"), "no server started")
}

// TestAdminAddrInUse: an admin listener that cannot start fails run, and
// the session listener's server, already serving, is closed.
func TestAdminAddrInUse(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer taken.Close()
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	var log bytes.Buffer
	err = run(ctx, []string{"-addr", "127.0.0.1:0", "-admin-addr", taken.Addr().String(), "-stages", "sim"},
		func(string) string { return "" }, &bytes.Buffer{}, &log)
	require.ErrorContains(t, err, "listen on -admin-addr (off to disable)")
	require.False(t, strings.Contains(log.String(), "voiced listening"), "not announced")
}
