// Package session serves voiced.v1 sessions over WebSocket. A Server
// accepts connections and owns the sessions; each Session runs its reader
// loop in the connection's handler goroutine and one writer goroutine, and
// keeps its in-flight requests in a cancel registry. Each request runs one
// pipeline in a goroutine the session waits for, and ends with exactly one
// terminal message.
package session
