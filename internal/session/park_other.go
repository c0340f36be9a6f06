//go:build !linux

package session

import (
	"errors"
	"net"
)

// poller is Linux's only: elsewhere idle sessions keep their goroutine.
type poller struct{}

func newPoller() (*poller, error) { return nil, errors.New("parking idle sessions needs epoll") }

func (*poller) arm(net.Conn, bool, func(uintptr) bool) error { return errors.ErrUnsupported }
func (*poller) wait() ([]uintptr, bool)                      { return nil, false }
func (*poller) close()                                       {}
