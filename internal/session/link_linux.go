package session

import (
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// unackedOf reads the bytes conn's kernel send queue holds, sent or not,
// that the peer has not acknowledged (TIOCOUTQ); nil when conn has no
// descriptor.
func unackedOf(conn net.Conn) func() (int64, bool) {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	return func() (int64, bool) {
		var n int
		var ierr error
		if err := rc.Control(func(fd uintptr) { n, ierr = unix.IoctlGetInt(int(fd), unix.TIOCOUTQ) }); err != nil || ierr != nil {
			return 0, false
		}
		return int64(n), true
	}
}
