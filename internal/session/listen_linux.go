package session

import "syscall"

func setDeferAccept(fd uintptr, seconds int) error {
	return syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_DEFER_ACCEPT, seconds)
}
