package session

import (
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
)

// poller waits for parked connections with an epoll instance of its own,
// beside the Go runtime's: a connection is armed one-shot, so it reports
// readiness once and is re-armed at its next park. The instance is itself
// waited for in the runtime's poller, as a non-blocking file: a goroutine
// blocked in epoll_wait would hold its thread and, worse, its P, and the
// readers it starts would wait in that P's queue until the runtime took
// the P back (milliseconds on a quiet process).
type poller struct {
	f      *os.File // the epoll instance
	rc     syscall.RawConn
	events [128]syscall.EpollEvent
	fds    []uintptr
}

func newPoller() (*poller, error) {
	epfd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("epoll_create1: %w", err)
	}
	if err := syscall.SetNonblock(epfd, true); err != nil {
		syscall.Close(epfd)
		return nil, fmt.Errorf("epoll instance: %w", err)
	}
	f := os.NewFile(uintptr(epfd), "parked sessions")
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("epoll instance: %w", err)
	}
	return &poller{f: f, rc: rc}, nil
}

// errNotPollable is arm's answer for a connection without a descriptor
// (a TLS connection, a pipe in tests).
var errNotPollable = errors.New("connection has no file descriptor")

// errNotEntered is arm's answer when enter refused the descriptor.
var errNotEntered = errors.New("connection closing")

// arm asks for one readiness report of conn's descriptor, after enter has
// accepted it (false: arm does nothing); registered says it was armed
// before, and is re-armed.
func (p *poller) arm(conn net.Conn, registered bool, enter func(fd uintptr) bool) error {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return errNotPollable
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return err
	}
	var ctlErr error
	// Control holds the descriptor open while the callback runs.
	err = rc.Control(func(fd uintptr) {
		if !enter(fd) {
			ctlErr = errNotEntered
			return
		}
		err := p.rc.Control(func(epfd uintptr) {
			ev := syscall.EpollEvent{Events: syscall.EPOLLIN | syscall.EPOLLRDHUP | syscall.EPOLLONESHOT, Fd: int32(fd)}
			add, mod := syscall.EPOLL_CTL_ADD, syscall.EPOLL_CTL_MOD
			if registered {
				add, mod = mod, add
			}
			err := syscall.EpollCtl(int(epfd), add, int(fd), &ev)
			if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.EEXIST) {
				err = syscall.EpollCtl(int(epfd), mod, int(fd), &ev)
			}
			ctlErr = err
		})
		if ctlErr == nil {
			ctlErr = err // the epoll instance is closed: the server is stopping
		}
	})
	if err == nil {
		err = ctlErr
	}
	return err
}

// wait blocks until some armed descriptors are readable and returns them
// (valid until the next call); false once closed.
func (p *poller) wait() ([]uintptr, bool) {
	var n int
	var werr error
	err := p.rc.Read(func(epfd uintptr) bool {
		for {
			n, werr = syscall.EpollWait(int(epfd), p.events[:], 0)
			if !errors.Is(werr, syscall.EINTR) {
				return werr != nil || n > 0
			}
		}
	})
	if err != nil || werr != nil {
		return nil, false
	}
	p.fds = p.fds[:0]
	for _, ev := range p.events[:n] {
		p.fds = append(p.fds, uintptr(ev.Fd))
	}
	return p.fds, true
}

// close ends wait and releases the instance.
func (p *poller) close() { p.f.Close() }
