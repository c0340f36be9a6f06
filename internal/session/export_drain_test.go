package session

import "time"

// DrainNowForTest begins the drain of every session, as Shutdown does,
// and returns at once: each session is draining on return.
func (srv *Server) DrainNowForTest() {
	for _, s := range srv.beginDrain() {
		s.drain(time.Second)
	}
}
