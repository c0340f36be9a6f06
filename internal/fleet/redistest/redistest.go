// Package redistest runs Debian's real redis-server on a free loopback
// port for tests, and stops, restarts or freezes it on demand.
package redistest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/voiced/voiced/internal/voicedtest"
)

// Server is one redis-server process.
type Server struct {
	t    testing.TB
	Addr string
	dir  string
	cmd  *exec.Cmd
	done chan struct{}
}

// Binary is the server the tests run.
const Binary = "redis-server"

// Available reports whether redis-server is installed.
func Available() bool {
	_, err := exec.LookPath(Binary)
	return err == nil
}

// Start runs redis-server on a free loopback port until the test ends; it
// skips the test when redis-server is not installed.
func Start(t testing.TB) *Server {
	t.Helper()
	return StartOn(t, FreePort(t))
}

// StartOn is Start on the given port.
func StartOn(t testing.TB, port int) *Server {
	t.Helper()
	if !Available() {
		t.Skip("redis-server not installed (Debian package redis-server): skipping the Redis tests")
	}
	s := &Server{t: t, Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), dir: t.TempDir()}
	s.start()
	t.Cleanup(s.Stop)
	return s
}

// URL is the server's redis:// URL.
func (s *Server) URL() string { return "redis://" + s.Addr + "/0" }

// FreePort returns a loopback TCP port that was free a moment ago, for a
// process the test starts to listen on. It is taken below the ephemeral
// range (32768 up on Linux): a port the kernel handed out (":0") is
// ephemeral, and any outbound connection (the tests run beside every
// other package's) could take it before the process binds it.
func FreePort(t testing.TB) int {
	t.Helper()
	const lo, hi = 20000, 32000
	for range 200 {
		port := lo + rand.IntN(hi-lo)
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			continue // taken
		}
		ln.Close()
		return port
	}
	t.Fatalf("free port: none found in %d-%d", lo, hi)
	return 0
}

func (s *Server) start() {
	s.t.Helper()
	_, port, _ := net.SplitHostPort(s.Addr)
	s.cmd = exec.Command(Binary, "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", s.dir, "--loglevel", "warning")
	if err := s.cmd.Start(); err != nil {
		s.t.Fatalf("start redis-server: %v", err)
	}
	s.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) {
		cmd.Wait()
		close(done)
	}(s.cmd, s.done)
	if err := s.waitReady(10 * time.Second); err != nil {
		s.Stop()
		s.t.Fatalf("redis-server on %s: %v", s.Addr, err)
	}
}

// waitReady polls PING, each bounded, until it answers or limit passes.
func (s *Server) waitReady(limit time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	c := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1, DialTimeout: 100 * time.Millisecond,
		ContextTimeoutEnabled: true, DisableIdentity: true})
	defer c.Close()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		pctx, pcancel := context.WithTimeout(ctx, 100*time.Millisecond)
		err := c.Ping(pctx).Err()
		pcancel()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not answering PING: %w", err)
		case <-s.done:
			return fmt.Errorf("exited: %v", s.cmd.ProcessState)
		case <-tick.C:
		}
	}
}

// Stop kills the server and waits for it to exit.
func (s *Server) Stop() {
	if s.cmd == nil {
		return
	}
	s.cmd.Process.Kill()
	<-s.done
	s.cmd = nil
}

// Restart starts the server again on the same port.
func (s *Server) Restart() {
	s.t.Helper()
	s.Stop()
	s.start()
}

// Freeze stops the server's process (SIGSTOP): connections are accepted
// and nothing is answered. Thaw undoes it.
func (s *Server) Freeze() { s.cmd.Process.Signal(syscall.SIGSTOP) }

// Thaw resumes a frozen server.
func (s *Server) Thaw() { s.cmd.Process.Signal(syscall.SIGCONT) }

// Slow returns the redis:// URL of a proxy to the server that holds
// everything a client sends for delay: a server that answers each command
// delay late.
func (s *Server) Slow(t testing.TB, delay time.Duration) string {
	t.Helper()
	p := s.Proxy(t)
	p.SetDelay(delay)
	return "redis://" + p.Addr + "/0"
}

// Proxy starts a loopback proxy to the server (its URL:
// "redis://"+Addr+"/0"), to slow it down (SetDelay) or cut its
// connections.
func (s *Server) Proxy(t testing.TB) *voicedtest.Proxy {
	t.Helper()
	return voicedtest.NewProxy(t, s.Addr)
}
