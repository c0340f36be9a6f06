package session

import (
	"log/slog"
	"sync"
	"time"
)

// DrainNowForTest begins the drain of every session, as Shutdown does,
// and returns at once: each session is draining on return.
func (srv *Server) DrainNowForTest() {
	for _, s := range srv.beginDrain() {
		s.drain(time.Second)
	}
}

// OnReplacedForTest is a log handler that runs fn once, in the reader,
// when a request ends replaced (see hookReplaced).
func OnReplacedForTest(fn func()) slog.Handler { return hookReplaced{once: &sync.Once{}, fn: fn} }
