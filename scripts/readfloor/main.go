//go:build linux

// Command readfloor measures the least CPU a server spends reading one
// real-time audio frame from a TCP connection, without any protocol on
// top: 660-byte writes (a 20 ms frame of 16 kHz PCM with its header) on
// N connections, each paced by its own goroutine and ticker at 50 a
// second as real-time clients are, read by one of two servers:
//
//   - go: a goroutine per connection blocked in Read, woken by the Go
//     runtime's poller (what voiced does, under coder/websocket);
//   - epoll: the descriptors taken out of the Go runtime's poller (a
//     dup(2) of each, the original closed) and read by one epoll loop per
//     CPU on locked threads, edge-triggered, until a short read.
//
// It prints the server process's CPU time per frame read over a window.
// docs/benchmarks.md ("Saturation, seventh pass") records what it found:
// the epoll loops cost as much as Go's poller or more, so an event loop of
// voiced's own would not lower a frame's cost.
//
//	go build -o /tmp/readfloor ./scripts/readfloor
//	/tmp/readfloor -mode go & sleep 0.5; /tmp/readfloor -mode client -n 500 & wait %1; kill %2
package main

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"runtime"
	"sync/atomic"
	"syscall"
	"time"
)

// frameBytes is one client frame: 640 bytes of PCM and a 20-byte header.
const frameBytes = 660

// epollET is EPOLLET, which package syscall types as a negative int.
const epollET = 1 << 31

func main() {
	mode := flag.String("mode", "go", "go or epoll (a server), or client")
	addr := flag.String("addr", "127.0.0.1:19555", "address the server listens on and the client dials")
	n := flag.Int("n", 500, "client connections")
	warm := flag.Duration("warm", 5*time.Second, "server: time for the clients to connect before measuring")
	window := flag.Duration("d", 15*time.Second, "server: the measured window")
	flag.Parse()
	var err error
	switch *mode {
	case "client":
		err = client(*addr, *n)
	case "go", "epoll":
		err = server(*mode, *addr, *warm, *window)
	default:
		err = fmt.Errorf("unknown -mode %q", *mode)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "readfloor:", err)
		os.Exit(1)
	}
}

// client writes a frame on each of n connections every 20 ms, the
// connections' ticks spread over the period, until killed.
func client(addr string, n int) error {
	buf := make([]byte, frameBytes)
	for i := range n {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			return err
		}
		go func() {
			time.Sleep(time.Duration(i) * 20 * time.Millisecond / time.Duration(n))
			t := time.NewTicker(20 * time.Millisecond)
			for range t.C {
				if _, err := c.Write(buf); err != nil {
					return
				}
			}
		}()
	}
	select {}
}

// server reads every connection it accepts, the way mode says, and prints
// its CPU per frame over window once warm has passed.
func server(mode, addr string, warm, window time.Duration) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	var read atomic.Int64 // bytes
	var ep int
	if mode == "epoll" {
		if ep, err = syscall.EpollCreate1(0); err != nil {
			return err
		}
		for range runtime.GOMAXPROCS(0) {
			go epollLoop(ep, &read)
		}
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if mode == "go" {
				go readLoop(c, &read)
				continue
			}
			if err := adopt(ep, c.(*net.TCPConn)); err != nil {
				fmt.Fprintln(os.Stderr, "readfloor:", err)
			}
		}
	}()
	time.Sleep(warm)
	c0, b0, t0 := cpuTime(), read.Load(), time.Now()
	time.Sleep(window)
	c1, b1, t1 := cpuTime(), read.Load(), time.Now()
	frames := float64(b1-b0) / frameBytes
	secs := t1.Sub(t0).Seconds()
	fmt.Printf("%s: %.0f frames/s, %.2f cores, %.2f us of CPU per frame\n", mode, frames/secs, (c1-c0).Seconds()/secs, float64((c1-c0).Microseconds())/frames)
	return nil
}

// adopt moves c's socket out of the Go runtime's poller into epoll set
// ep: a dup of the descriptor made with a plain dup(2), which no poller
// knows of (net's File would register its copy with Go's poller again),
// then c closed, which takes the original out of it.
func adopt(ep int, c *net.TCPConn) error {
	rc, err := c.SyscallConn()
	if err != nil {
		return err
	}
	fd, dupErr := -1, error(nil)
	if err := rc.Control(func(s uintptr) { fd, dupErr = syscall.Dup(int(s)) }); err != nil {
		return err
	}
	c.Close()
	if dupErr != nil {
		return dupErr
	}
	ev := syscall.EpollEvent{Events: syscall.EPOLLIN | epollET, Fd: int32(fd)}
	if err := syscall.SetNonblock(fd, true); err != nil {
		syscall.Close(fd)
		return err
	}
	if err := syscall.EpollCtl(ep, syscall.EPOLL_CTL_ADD, fd, &ev); err != nil {
		syscall.Close(fd)
		return err
	}
	return nil
}

func readLoop(c net.Conn, read *atomic.Int64) {
	b := make([]byte, 4096)
	for {
		n, err := c.Read(b)
		if err != nil {
			return
		}
		read.Add(int64(n))
	}
}

func epollLoop(ep int, read *atomic.Int64) {
	runtime.LockOSThread()
	evs := make([]syscall.EpollEvent, 256)
	b := make([]byte, 4096)
	for {
		k, err := syscall.EpollWait(ep, evs, -1)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "readfloor: epoll_wait:", err)
			os.Exit(1)
		}
		for _, ev := range evs[:k] {
			for { // edge-triggered: read until the socket is drained
				n, err := syscall.Read(int(ev.Fd), b)
				if n > 0 {
					read.Add(int64(n))
				}
				if err != nil || n < len(b) {
					break
				}
			}
		}
	}
}

// cpuTime returns the process's user and system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		fmt.Fprintln(os.Stderr, "readfloor: getrusage:", err)
		os.Exit(1)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
