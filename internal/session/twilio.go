package session

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"github.com/google/uuid"

	"github.com/voiced/voiced/internal/audio/mulaw"
	"github.com/voiced/voiced/internal/protocol"
	"github.com/voiced/voiced/internal/stages/tts"
	"github.com/voiced/voiced/internal/twilio"
)

// Phone calls through Twilio's bidirectional Media Streams. A call is a
// session like any other, in server-turn mode with 8 kHz μ-law in and
// speech out at 8 kHz: only the wire differs. The reader takes Twilio's
// messages instead of voiced.v1's, and what the session sends goes out
// through translate: spoken answers as media messages and a mark after
// each answer (Twilio echoes it once played); the turn detector adds clear
// when the caller starts speaking over audio not yet played (bargeIn). The
// rest (transcripts, results) is not Twilio's business and stays in the
// server.

// DefaultGreeting is what a call hears first (Config.Greeting).
const DefaultGreeting = "Hello. How can I help you?"

// Close codes of a call the server ends.
const (
	closeCallEnded = websocket.StatusNormalClosure // Twilio's stop
	closeBadAuth   = websocket.StatusPolicyViolation
	closeBadFormat = websocket.StatusUnsupportedData
)

// ServeTwilio serves a Twilio Media Streams WebSocket (GET /v1/twilio).
// With a Twilio auth token configured, the handshake must carry Twilio's
// signature, and a signed call is authenticated. Otherwise, with tokens
// configured, the caller authenticates with the query parameter token (or
// access_token) before the upgrade, or, since Twilio cannot send headers,
// with the custom parameter token of its start message; until then
// nothing is recognised or spoken.
func (s *Server) ServeTwilio(w http.ResponseWriter, r *http.Request) {
	authed := len(s.cfg.Tokens) == 0
	// The tenant of a call, and the client it counts against
	// (Config.MaxSessionsPerClient): the Twilio account when Twilio
	// signed it; else the tenant of its token, of its URL or, claimed
	// once it arrives, of its start; without tokens, its address.
	a := admission{addr: s.clientAddr(r), call: &call{}}
	if authed {
		a.client = clientKey("", a.addr)
	}
	if s.cfg.TwilioAuthToken != "" {
		signed := s.twilioURL(r)
		if !twilio.ValidSignature(s.cfg.TwilioAuthToken, signed, r.Header.Get(twilio.SignatureHeader)) {
			s.metrics.sessionsTotal.WithLabelValues("refused_signature").Inc()
			// The URL tells a misconfigured -twilio.public-url; without
			// its query, which may hold a token.
			path, _, _ := strings.Cut(signed, "?")
			s.log.Debug("phone call refused: X-Twilio-Signature missing or not of this URL", "url", path, "addr", a.addr)
			http.Error(w, "missing or invalid X-Twilio-Signature", http.StatusForbidden)
			return
		}
		// Only Twilio, with the account's auth token, signs: the call
		// needs no other token.
		authed = true
		a.tenant = twilioAccount
		a.client = clientKey(a.tenant, a.addr)
	}
	q := r.URL.Query()
	// Without tokens configured there is nothing to check a token against:
	// a phone number set up with one still reaches a loopback server.
	if tok := cmp.Or(q.Get("token"), q.Get("access_token")); tok != "" && !authed {
		if !s.validToken(tok) {
			s.metrics.sessionsTotal.WithLabelValues("refused_auth").Inc()
			s.logRefused("refused_auth", a) // no tenant: the token is none of the server's
			refuseUnauthorized(w, "missing or invalid access token")
			return
		}
		authed = true
		a.tenant = s.tenantsOfToken(tok).id
		a.client = clientKey(a.tenant, a.addr)
	}
	// A call without a token in its URL waits for its start's: at most
	// so many at once (Server.unauthed), or anyone who can reach the
	// server could hold every session with calls that never authenticate.
	done := func() {} // the call has authenticated, or ended
	if !authed {
		select {
		case s.unauthed <- struct{}{}:
			done = sync.OnceFunc(func() { <-s.unauthed })
		default:
			s.metrics.sessionsTotal.WithLabelValues("refused_unauthenticated").Inc()
			s.logRefused("refused_unauthenticated", a)
			w.Header().Set("Retry-After", "1")
			http.Error(w, "too many calls waiting to authenticate (custom parameter token)", http.StatusServiceUnavailable)
			return
		}
	}
	sess, conn := s.upgrade(w, r, a) // Twilio offers no subprotocol
	if sess == nil {
		done()
		return
	}
	// Each call is a conversation of its own: Twilio does not resume. Its
	// tenant is the call's (a.tenant), not tenantOf(r): Twilio sends no
	// Authorization header. A token in the start names it there.
	sess.startConversation(resumption{conv: uuid.NewString(), tenant: tenants{id: a.tenant}})
	go func() {
		defer s.release(sess)
		defer done()
		sess.serveCall(conn, authed, done)
	}()
}

// twilioURL is the URL Twilio requested, as it signed it: the configured
// public URL (the request's path when it names none) or the one the
// request reached, the forwarded scheme and host when trusted; with the
// query as it arrived, neither decoded nor re-encoded.
func (s *Server) twilioURL(r *http.Request) string {
	uri := r.RequestURI // path and query as they arrived
	if !strings.HasPrefix(uri, "/") {
		uri = r.URL.RequestURI() // absolute-form, or a request made in a test
	}
	if pub := s.cfg.TwilioPublicURL; pub != "" {
		if u, err := url.Parse(pub); err == nil && u.Path == "" {
			return pub + uri
		}
		if r.URL.RawQuery != "" {
			return pub + "?" + r.URL.RawQuery
		}
		return pub
	}
	scheme, host := "ws", r.Host
	if r.TLS != nil {
		scheme = "wss"
	}
	if s.cfg.TwilioTrustForwarded {
		switch forwarded(r, "X-Forwarded-Proto") {
		case "https", "wss":
			scheme = "wss"
		case "http", "ws":
			scheme = "ws"
		}
		host = cmp.Or(forwarded(r, "X-Forwarded-Host"), host)
	}
	return scheme + "://" + host + uri
}

// forwarded is the first value of the X-Forwarded header h: the one the
// proxy nearest Twilio set, when proxies append to a list.
func forwarded(r *http.Request, h string) string {
	v, _, _ := strings.Cut(r.Header.Get(h), ",")
	return strings.TrimSpace(v)
}

// serveCall runs a phone call until Twilio stops it or the connection
// ends. authenticated is called once the call's start brings a valid
// token.
func (s *Session) serveCall(conn *websocket.Conn, authed bool, authenticated func()) {
	conn.SetReadLimit(s.srv.cfg.MaxMessageBytes)
	ctx, stop := context.WithCancelCause(s.srv.base)
	defer stop(nil)
	s.ready(ctx, conn)
	s.log.Debug("call started")
	// A forced shutdown cuts the connection, also in teardown: its
	// writer's close handshake waits for a peer that may never answer.
	stopAfter := context.AfterFunc(s.srv.base, func() { s.cut(conn) })
	defer stopAfter()
	gctx, stopGreeting := context.WithCancel(ctx)
	err := s.readCall(ctx, gctx, conn, authed, authenticated)
	stopGreeting()
	s.closeTurns()
	s.teardown(ctx, conn, err)
}

// errCallEnded is the reader's end when Twilio sends stop.
var errCallEnded = errors.New("call ended")

// callReader is the state readCall keeps between Twilio's messages.
type callReader struct {
	s             *Session
	authed        bool // signed, a token in the URL, or a start's token taken
	authenticated func()
	startSeen     atomic.Bool // a start was acted on (taken or refused); read by the start timer
	seq           twilio.Sequence
	started       bool
	sid           string // the call's streamSid, from its start
	warned        bool   // a bad message was logged at warning level
}

// readCall reads Twilio's messages until stop or the connection's end,
// calling authenticated once a start brings a valid token.
func (s *Session) readCall(ctx, gctx context.Context, conn *websocket.Conn, authed bool, authenticated func()) error {
	c := &callReader{s: s, authed: authed, authenticated: authenticated}
	t := c.startTimer()
	defer t.Stop()
	for {
		typ, buf, arrival, err := s.readNext(conn)
		if err != nil {
			return err
		}
		if typ != websocket.MessageText {
			putBuffer(buf)
			s.queueClose(closeBadFormat, "Media Streams messages are JSON text")
			continue
		}
		m, err := twilio.Parse(*buf)
		putBuffer(buf)
		if errors.Is(err, twilio.ErrUnknownEvent) {
			continue // a newer event: ignored, as Twilio asks
		}
		if err != nil {
			c.warn(ctx, err)
			continue
		}
		if !c.inSequence(ctx, &m) {
			continue
		}
		if m.Event == twilio.EventStop {
			s.endCall()
			return errCallEnded
		}
		c.handle(ctx, gctx, &m, arrival)
	}
}

// startTimer bounds the wait for a valid start, authenticated or not: a
// call that never sends one (none came, or it was malformed: logged, a
// missing sequenceNumber, say) is silent for ever, while its media keep
// the idle timeout away, and must not hold a session (and the line).
func (c *callReader) startTimer() *time.Timer {
	s, needAuth := c.s, !c.authed
	return time.AfterFunc(s.srv.cfg.CallStartTimeout, func() {
		if c.startSeen.Load() {
			return
		}
		if needAuth {
			s.refuseCallAuth("no valid start message with a valid token (custom parameter token) in time")
			return
		}
		s.queueClose(closeBadAuth, "no valid start message in time")
	})
}

// warn logs a bad message: once per call at warning level, since the
// peer may not have authenticated yet and must not flood the log.
func (c *callReader) warn(ctx context.Context, err error) {
	c.s.log.Log(ctx, warnFirst(!c.warned), "bad Media Streams message", "err", err)
	c.warned = true
}

// inSequence reports whether m belongs to the call and is not a resent
// chunk: a message of another stream, or media heard already, is dropped.
func (c *callReader) inSequence(ctx context.Context, m *twilio.Message) bool {
	s := c.s
	if c.started && m.StreamSid != c.sid {
		// Not the call's stream: its media are not the caller's voice,
		// its stop does not end the call, and its numbers are not the
		// call's sequence.
		c.warn(ctx, fmt.Errorf("%w: %s of streamSid %q, not the call's %q",
			twilio.ErrMessage, m.Event, protocol.Truncate(m.StreamSid, 40), c.sid))
		return false
	}
	// The sequence begins with start: a message before it must not
	// count, or the stream's own chunks after it would look resent and be
	// dropped.
	if !c.started && m.Event != twilio.EventStart {
		return true
	}
	err := c.seq.Check(*m)
	switch {
	case err == nil:
	case errors.Is(err, twilio.ErrDuplicate) && m.Event == twilio.EventMedia:
		// Resent by Twilio (retransmit, reconnect): the audio was heard
		// already, and fed again it would be heard twice.
		if s.stream != nil && m.Media.Track == "inbound" {
			s.srv.metrics.twilioDupMedia.Inc()
		}
		s.log.Debug("Media Streams duplicate dropped", "err", err)
		return false
	default:
		// Audio went missing or came out of order: the turn detector
		// copes with a gap; note it.
		s.log.Debug("Media Streams sequence", "err", err)
	}
	return true
}

// handle acts on one of the call's messages other than stop.
func (c *callReader) handle(ctx, gctx context.Context, m *twilio.Message, arrival time.Time) {
	s := c.s
	switch m.Event {
	case twilio.EventStart:
		c.start(gctx, m)
	case twilio.EventMedia:
		if s.stream == nil || m.Media.Track != "inbound" {
			return // before start, or not the caller's audio
		}
		payload, _ := m.Media.Audio() // checked by Parse
		a := protocol.Audio{Header: protocol.AudioHeader{Seq: s.stream.nextSeq}, PCM: payload}
		s.streamAudio(ctx, &a, arrival)
	case twilio.EventMark:
		s.markEchoed(m.Mark.Name)
	case twilio.EventDTMF:
		if s.stream == nil {
			return // before start, as media: not (yet) a caller's
		}
		// A key pressed is what the caller says with the keypad (a PIN,
		// a card number): personal data, like a transcript.
		if s.srv.cfg.LogTranscripts {
			s.log.Info("dtmf", "digit", m.DTMF.Digit)
		} else {
			s.log.Debug("dtmf")
		}
	}
}

// start takes the call's first start message, or refuses the call with
// a close: a bad format, a missing or invalid token, or a client past
// -max-sessions-per-client. A start after the first is ignored.
func (c *callReader) start(gctx context.Context, m *twilio.Message) {
	s := c.s
	if c.started {
		return
	}
	c.started, c.sid = true, m.StreamSid
	c.startSeen.Store(true) // taken, or refused with its own close below
	if err := m.Start.CheckFormat(); err != nil {
		s.queueClose(closeBadFormat, err.Error())
		return
	}
	if !c.authed {
		token := m.Start.CustomParameters["token"]
		if !s.srv.validToken(token) {
			s.refuseCallAuth("missing or invalid token (custom parameter token)")
			return
		}
		s.tenant = s.srv.tenantsOfToken(token).id
		if !s.srv.claimClient(s, clientKey(s.tenant, "")) {
			// Past the upgrade: refused like a bad token, with a close
			// (the upgrade's 429 is too late).
			s.srv.metrics.sessionsTotal.WithLabelValues(refusedClientLimit).Inc()
			s.log.Debug("phone call refused: its token's client holds -max-sessions-per-client sessions",
				"outcome", refusedClientLimit, "tenant", s.tenant, "addr", s.addr)
			s.queueClose(closeBadAuth, refusals[refusedClientLimit])
			return
		}
		s.mu.Lock() // saveConversation reads it under mu
		s.tenants = tenants{id: s.tenant}
		s.mu.Unlock()
		c.authed = true
		c.authenticated()
	}
	if err := s.startCall(gctx, m.StreamSid); err != nil {
		s.log.Warn("call not started", "err", err)
		s.queueClose(websocket.StatusInternalError, "turn detection unavailable")
	}
}

// refuseCallAuth refuses a call that brought no valid token, with a close
// that says why, logged (debug) with its address like the upgrade's
// refusals: no tenant, the token being none of the server's.
func (s *Session) refuseCallAuth(why string) {
	s.srv.metrics.sessionsTotal.WithLabelValues("refused_auth").Inc()
	s.log.Debug("phone call refused", "outcome", "refused_auth", "reason", why, "addr", s.addr)
	s.queueClose(closeBadAuth, why)
}

// endCall closes the call on Twilio's stop, at once: the stream is gone,
// so what is still queued for it (answer audio, marks, a clear) is
// dropped rather than written after stop, and so is anything queued from
// here on (a turn's mark decided meanwhile).
func (s *Session) endCall() {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := closeStatus{closeCallEnded, "call ended"}
	s.closing, s.closeWith = true, c
	s.kickLocked(c)
	s.startWriterLocked()
}

// startCall switches the session to what a call needs and speaks the
// greeting.
func (s *Session) startCall(gctx context.Context, streamSid string) error {
	s.call.mu.Lock()
	s.call.streamSid = streamSid
	s.call.mu.Unlock()
	ts, err := s.newTurnStream(protocol.MuLawRate, (&protocol.TurnDetection{Mode: protocol.TurnsServer}).Resolved())
	if err != nil {
		return err
	}
	s.stream, s.sampleRate = ts, protocol.MuLawRate
	s.inbound = protocol.Inbound{ServerTurns: true, MuLaw: true}
	syn := s.srv.cfg.Speech
	if syn == nil {
		return nil // no speech out: the caller is heard, not answered aloud
	}
	voice := syn.Voices()[0]
	s.speech = &protocol.SpeechSettings{Voice: voice, SampleRate: protocol.MuLawRate, Encoding: protocol.SpeechBinary}
	greeting := s.srv.cfg.Greeting
	if greeting == "" {
		greeting = DefaultGreeting
	}
	if greeting == "-" {
		return nil
	}
	gctx, stop := context.WithCancel(gctx)
	s.mu.Lock()
	s.call.stopGreeting = stop
	s.mu.Unlock()
	s.wg.Go(func() {
		defer stop()
		_, err := syn.Synthesize(gctx, tts.Request{Text: greeting, Voice: voice, SampleRate: protocol.MuLawRate}, func(pcm []int16) {
			// Checked and queued under s.mu, as a barge-in stops the
			// greeting and decides its clear: a chunk is queued either
			// before, and cleared, or not at all (an engine may emit
			// one it had checked its context for just before the stop).
			s.mu.Lock()
			defer s.mu.Unlock()
			if gctx.Err() != nil {
				return
			}
			if data, err := s.call.media(pcm); err == nil {
				s.sendLocked(outbound{data: data, play: playback{audio: true}})
			}
		})
		if err != nil {
			s.log.Debug("greeting not spoken", "err", err)
			return
		}
		if o, ok := s.call.mark("greeting"); ok {
			s.mu.Lock()
			s.sendLocked(o)
			s.mu.Unlock()
		}
	})
	return nil
}

// bargeIn stops what the call plays when the caller starts speaking over
// it: the greeting's synthesis, and with clear the audio Twilio holds
// that has not played. The turns it belonged to must have ended first,
// so that none of their audio follows the clear. Under s.mu, which the
// greeting holds from its check of its context to its chunk queued, and
// which orders the queue the playback state follows.
func (s *Session) bargeIn() {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.call
	if c.stopGreeting != nil {
		c.stopGreeting()
		c.stopGreeting = nil
	}
	if !c.unplayed {
		return
	}
	c.mu.Lock()
	data, err := twilio.Encode(twilio.ClearMessage(c.streamSid))
	c.mu.Unlock()
	if err == nil && s.sendLocked(outbound{data: data}) {
		c.unplayed = false
	}
}

// markEchoed notes a mark Twilio echoed: the audio queued before it has
// played (or was cleared).
func (s *Session) markEchoed(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if name == s.call.lastMark {
		s.call.unplayed = false
	}
}

// call is the Twilio side of a session: the stream's id and what has been
// queued for playback and not yet played. The playback state changes as
// messages are queued (follow), not as they are built: one built and then
// dropped, or queued after another built later, must not count, or a
// mark's echo would be taken for audio queued after it having played.
type call struct {
	mu        sync.Mutex
	streamSid string // guarded by mu
	// The rest is guarded by the session's mu (the queue's).
	unplayed bool   // audio queued since the last mark Twilio echoed
	lastMark string // the last mark queued after audio
	// stopGreeting ends the greeting's synthesis, when the caller starts
	// speaking over it.
	stopGreeting context.CancelFunc
}

// playback is what a message queued for a call is to Twilio's playback.
type playback struct {
	audio bool   // speech to play
	mark  string // a mark after the audio queued so far
}

// follow notes a message queued for the call; the session's mu is held.
func (c *call) follow(p playback) {
	switch {
	case p.audio:
		c.unplayed, c.lastMark = true, ""
	case p.mark != "":
		c.lastMark = p.mark
	}
}

// media encodes speech as a media message of μ-law.
func (c *call) media(pcm []int16) ([]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return twilio.Encode(twilio.MediaMessage(c.streamSid, mulaw.AppendEncode(nil, pcm)))
}

// mark encodes a mark after the audio queued so far.
func (c *call) mark(name string) (outbound, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	data, err := twilio.Encode(twilio.MarkMessage(c.streamSid, name))
	return outbound{data: data, play: playback{mark: name}}, err == nil
}

// translate turns a session message into what Twilio gets of it: a mark
// at the end of each answer. Everything else is dropped (the clear of a
// barge-in is the turn detector's, see bargeIn).
func (c *call) translate(v any) (outbound, bool) {
	if m, ok := v.(protocol.Result); ok {
		return c.mark(m.RequestID)
	}
	return outbound{}, false
}
