package voicedtest

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Proxy is a loopback TCP proxy for tests: Cut drops every connection
// through it at once, as a lost network does, and SetDelay holds what
// clients send for a while before passing it on, as a slow server does.
// It runs until the test ends.
type Proxy struct {
	// Addr is the proxy's host:port.
	Addr   string
	target string
	ln     net.Listener
	delay  atomic.Int64 // nanoseconds
	wg     sync.WaitGroup

	mu     sync.Mutex
	conns  []net.Conn // guarded by mu
	closed bool       // the test ended: late connections are closed; guarded by mu
}

// NewProxy starts a proxy to target (host:port).
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("voicedtest proxy: %v", err)
	}
	p := &Proxy{Addr: ln.Addr().String(), target: target, ln: ln}
	p.wg.Go(p.accept)
	t.Cleanup(func() {
		ln.Close()
		p.mu.Lock()
		p.closed = true
		p.mu.Unlock()
		p.Cut()
		p.wg.Wait()
	})
	return p
}

// SetDelay holds what clients send from now on for d.
func (p *Proxy) SetDelay(d time.Duration) { p.delay.Store(int64(d)) }

// Open is how many client connections the proxy holds now (those closed
// since the last Cut included).
func (p *Proxy) Open() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.conns) / 2
}

// Cut closes every connection through the proxy so far and returns how
// many client connections it cut.
func (p *Proxy) Cut() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	n := len(p.conns) / 2
	p.conns = nil
	return n
}

func (p *Proxy) accept() {
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial("tcp", p.target)
		if err != nil {
			in.Close()
			continue
		}
		p.mu.Lock()
		if p.closed {
			// Accepted as the test ended, after its Cut: nobody would
			// close it, and the cleanup would wait for its copies.
			p.mu.Unlock()
			in.Close()
			out.Close()
			return
		}
		p.conns = append(p.conns, in, out)
		p.mu.Unlock()
		p.wg.Go(func() { p.forward(out, in); out.Close() })
		p.wg.Go(func() { _, _ = io.Copy(in, out); in.Close() })
	}
}

// forward copies what a client sends, each chunk the delay after it was
// read.
func (p *Proxy) forward(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if d := p.delay.Load(); d > 0 {
				time.Sleep(time.Duration(d)) // the delay is the point
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
