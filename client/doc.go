// Package client is the reference Go client of voiced's WebSocket
// protocol v1 (voiced.v1, docs/protocol.md). It is what voiceload uses,
// and what a Go program that talks to voiced should use.
//
// A Client is one session: Dial connects with the bearer token and the
// voiced.v1 subprotocol, reads session.ready and aligns its clock with the
// server's (the ping with the shortest round trip of a few, taken at its
// midpoint), so deadlines are computed on the server's clock
// (Client.DeadlineIn). Open registers a request under its requestId;
// Request.Send streams its audio as binary frames (a 4-byte big-endian
// header length, the JSON header, 16-bit little-endian PCM), numbering
// the frames; every message the server sends with that requestId,
// terminal message included, goes to the request's handler, in order,
// and Request.Wait returns the terminal message. Frame.MuLaw sends the
// samples as 8 kHz μ-law, for a session with encoding mulaw.
//
// With server turn detection (Update with TurnDetection mode server),
// StreamFrame streams the audio with only a sequence number; the server
// names each turn it finds in input.speech_started, which reaches
// Config.OnUnrouted: Open the turn's id there to get its later messages.
//
// When the connection is lost, the client reconnects with exponential
// backoff and equal jitter and, when the last session.ready carried a
// resumeToken, resumes with ?resume=TOKEN (the latest token: each result
// carries a fresh one, so a long session can still resume). A resumed session
// (session.ready "resumed": true) first replays the terminal messages the
// client missed: each reaches the request that was waiting for it exactly
// once, marked Replayed, and one the client already had is dropped; a
// request whose terminal is not replayed (lost with a killed instance)
// ends with ErrConnectionLost Reconnect.TerminalGrace after its
// deadline as the server holds it: the last frame's deadlineAt, at most
// maxBudgetMs after that frame was sent (a server turn's: its
// input.speech_stopped plus maxBudgetMs).
// A session accepted for the token without its history ("resumed": false,
// the same conversationId) is waited on the same way: it replays the
// terminals its instance holds. A new conversation (no token, or the
// server refused it) ends the requests of the lost connection with
// ErrConnectionLost.
//
// A connection quiet for Config.KeepAlive (10 s) is pinged, and dropped
// when the pong does not come (ErrNoPong): a half-open connection after a
// network change then reconnects in seconds, not minutes.
//
// One goroutine per Client reads the connection, calls the handlers and
// reconnects (a second one per connection keeps it alive); Close stops
// them and waits for them. Handlers (a request's, and the Config's
// OnConnect, OnDisconnect and OnUnrouted) run on that
// goroutine: they must be quick, must not wait for later messages of
// the session, and must not call Close or CloseNow (which wait for that
// goroutine); sending from a handler is fine. Nothing is queued without bound: the client keeps no
// messages, it hands each to its handler as it is read.
package client
