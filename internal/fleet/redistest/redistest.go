// Package redistest runs Debian's real redis-server on a free loopback
// port for tests, and stops, restarts or freezes it on demand.
package redistest

import (
	"context"
	"fmt"
	"io"
	"net"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
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

// FreePort returns a loopback TCP port that was free a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("free port: %v", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
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

// Slow returns the redis:// URL of a Proxy to the server holding
// everything a client sends for delay: a server that answers each command
// delay late.
func (s *Server) Slow(t testing.TB, delay time.Duration) string {
	t.Helper()
	return s.Proxy(t, delay).URL
}

// Proxy is a loopback proxy to a Server that holds everything a client
// sends for a delay before passing it on. It runs until the test ends.
type Proxy struct {
	// URL is the proxy's redis:// URL.
	URL   string
	delay atomic.Int64 // nanoseconds
}

// SetDelay changes the delay, for what is sent from now on.
func (p *Proxy) SetDelay(d time.Duration) { p.delay.Store(int64(d)) }

// Proxy starts a Proxy to the server with the given delay.
func (s *Server) Proxy(t testing.TB, delay time.Duration) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("redis proxy: %v", err)
	}
	p := &Proxy{URL: "redis://" + ln.Addr().String() + "/0"}
	p.SetDelay(delay)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns []net.Conn
	)
	track := func(c net.Conn) {
		mu.Lock()
		conns = append(conns, c)
		mu.Unlock()
	}
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", s.Addr)
			if err != nil {
				c.Close()
				continue
			}
			track(c)
			track(up)
			wg.Go(func() { p.delayCopy(up, c) })
			wg.Go(func() { io.Copy(c, up) })
		}
	})
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return p
}

// delayCopy copies from src to dst, each chunk the delay after it was
// read.
func (p *Proxy) delayCopy(dst, src net.Conn) {
	defer dst.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			time.Sleep(time.Duration(p.delay.Load())) // the delay is the point
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
