package session

// DetachedForTest reports whether the session with this id has lost its
// connection (its terminals now go to the missed list), or has ended.
func (srv *Server) DetachedForTest(id string) bool {
	srv.mu.Lock()
	var found *Session
	for s := range srv.sessions {
		if s.id == id {
			found = s
			break
		}
	}
	srv.mu.Unlock()
	if found == nil {
		return true
	}
	found.mu.Lock()
	defer found.mu.Unlock()
	return found.detached
}
