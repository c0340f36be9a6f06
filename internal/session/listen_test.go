package session_test

import (
	"context"
	"net"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/session"
)

// TestListenDefersAccept: on Linux the listener hands a connection over
// only once its client has sent something, so a connection still waiting
// for its request costs the process nothing; a silent client connected
// first is accepted after one that spoke.
func TestListenDefersAccept(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("TCP_DEFER_ACCEPT is Linux's")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ln, err := session.Listen(ctx, "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()

	accepted := make(chan net.Conn)
	go func() {
		defer close(accepted)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	next := func() net.Conn {
		t.Helper()
		select {
		case c := <-accepted:
			require.NotNil(t, c)
			t.Cleanup(func() { c.Close() })
			return c
		case <-ctx.Done():
			t.Fatal("nothing accepted")
			return nil
		}
	}
	var d net.Dialer
	silent, err := d.DialContext(ctx, "tcp", ln.Addr().String())
	require.NoError(t, err)
	defer silent.Close()
	speaker, err := d.DialContext(ctx, "tcp", ln.Addr().String())
	require.NoError(t, err)
	defer speaker.Close()
	_, err = speaker.Write([]byte("G"))
	require.NoError(t, err)

	// Accepted in order of their first bytes, not of their handshakes.
	require.Equal(t, speaker.LocalAddr().String(), next().RemoteAddr().String())
	_, err = silent.Write([]byte("G"))
	require.NoError(t, err)
	require.Equal(t, silent.LocalAddr().String(), next().RemoteAddr().String())

	// The option is on the listening socket.
	rc, err := ln.(syscall.Conn).SyscallConn()
	require.NoError(t, err)
	var secs int
	var gerr error
	require.NoError(t, rc.Control(func(fd uintptr) {
		secs, gerr = syscall.GetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_DEFER_ACCEPT)
	}))
	require.NoError(t, gerr)
	require.Positive(t, secs)

	ln.Close()
	for range accepted { // the accept loop ends with the listener
	}
}
