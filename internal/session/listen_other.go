//go:build !linux

package session

// setDeferAccept does nothing where there is no TCP_DEFER_ACCEPT: the
// listener accepts connections as they come.
func setDeferAccept(uintptr, int) error { return nil }
