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

// TestListenerAddrInUse: a listener that cannot start fails run. A fleet
// whose HAProxy agent's address is taken fails after the session listener
// opened, which is closed again; an admin listener fails with the session
// listener's server already serving, which is closed. Neither is
// announced as listening.
func TestListenerAddrInUse(t *testing.T) {
	for _, tt := range []struct {
		name string
		args func(taken string) []string
		want string
	}{
		{"haproxy agent", func(taken string) []string {
			return []string{"-admin-addr", "off", "-haproxy-agent-addr", taken}
		}, "listen on -haproxy-agent-addr"},
		{"admin", func(taken string) []string {
			return []string{"-admin-addr", taken}
		}, "listen on -admin-addr (off to disable)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			taken, err := net.Listen("tcp", "127.0.0.1:0")
			require.NoError(t, err)
			defer taken.Close()
			ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
			defer cancel()
			var log bytes.Buffer
			args := append([]string{"-addr", "127.0.0.1:0", "-stages", "sim"}, tt.args(taken.Addr().String())...)
			err = run(ctx, args, func(string) string { return "" }, &bytes.Buffer{}, &log)
			require.ErrorContains(t, err, tt.want)
			require.Equal(t, 1, exitStatus(err))
			require.False(t, strings.Contains(log.String(), "voiced listening"), "not announced")
		})
	}
}
