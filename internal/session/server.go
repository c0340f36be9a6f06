package session

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"github.com/google/uuid"

	"github.com/voiced/voiced/internal/audio/resample"
	"github.com/voiced/voiced/internal/pipeline"
	"github.com/voiced/voiced/internal/protocol"
)

// Runner runs one request's pipeline; *pipeline.Pipeline is the real one.
type Runner interface {
	Run(ctx context.Context, req pipeline.Request, sink pipeline.Sink)
}

var _ Runner = (*pipeline.Pipeline)(nil)

// Server accepts sessions at its ServeHTTP and owns them until they end.
type Server struct {
	cfg     Config
	runner  Runner
	audio   *pipeline.AudioBudget // audio waiting for recognizers, all sessions together
	log     *slog.Logger
	metrics *Metrics
	base    context.Context // parent of every session; cancelled by Close
	stop    context.CancelCauseFunc
	// inFlight counts the requests accepted and not yet ended, for the
	// fleet's capacity reports.
	inFlight atomic.Int64
	// vadWarned: the failure to make a voice activity detector has been
	// logged at warning level (once; then at debug level).
	vadWarned atomic.Bool
	// filters are the server-turn streams' resampling filters, one per
	// client rate, shared by every stream at that rate: a filter from
	// 22050 or 44100 Hz takes about 150 KiB and 8 ms to build. At most
	// one per supported rate.
	filters resample.Filters
	// sessionSeq numbers sessions in the order they are made (Session.seq).
	sessionSeq atomic.Uint64
	// unauthed holds a place for each phone call that upgraded without a
	// token and has not yet brought one in its start (ServeTwilio): a
	// quarter of MaxSessions, so that calls that never authenticate
	// cannot keep the server full.
	unauthed chan struct{}

	mu       sync.Mutex
	sessions map[*Session]struct{} // guarded by mu
	live     map[string]*Session   // by conversation id, the session serving it; guarded by mu
	convs    map[string][]*Session // by conversation id, its sessions here, live or older (startConversation to release); guarded by mu
	draining bool                  // guarded by mu
	reaping  bool                  // the reaper runs; guarded by mu
	wg       sync.WaitGroup        // one per session in sessions
	reaper   sync.WaitGroup        // the reaper, while it runs
	parker   parker                // idle sessions without a goroutine
	lag      lagger                // cfg.Load, when it tells the lag; else nil
	memory   memReturn             // returns a burst's freed memory once it is over

	// perClient counts the sessions of each client that holds any
	// (Config.MaxSessionsPerClient), by client key; guarded by mu.
	perClient map[string]int
}

// NewServer returns a server running requests through runner. metrics
// may be nil.
func NewServer(cfg Config, runner Runner, log *slog.Logger, metrics *Metrics) *Server {
	if metrics == nil {
		metrics = NewMetrics(nil)
	}
	base, stop := context.WithCancelCause(context.Background())
	cfg = cfg.WithDefaults()
	audio := pipeline.NewAudioBudget(cfg.MaxBufferedAudio)
	metrics.bufferedAudio(audio)
	lag, _ := cfg.Load.(lagger)
	s := &Server{
		lag:      lag,
		cfg:      cfg,
		runner:   runner,
		audio:    audio,
		log:      log,
		metrics:  metrics,
		base:     base,
		stop:     stop,
		sessions: make(map[*Session]struct{}),
		live:     make(map[string]*Session),
		convs:    make(map[string][]*Session),
		unauthed: make(chan struct{}, max(cfg.MaxSessions/4, 1)),

		perClient: make(map[string]int),
	}
	s.memory = memReturn{quiet: cfg.ReturnMemoryAfter, burst: returnMemoryBurst, free: freeOSMemory,
		returned: s.memoryReturned, busy: s.runsLate}
	return s
}

// returnMemoryBurst is the least burst of admitted sessions after which
// the server returns memory (Config.ReturnMemoryAfter): below it, what
// the upgrades left is a few megabytes, for the runtime to return.
const returnMemoryBurst = 1000

// runsLate reports whether the process sheds load or has lately run
// more than memReturnLag late: no time to return memory.
func (s *Server) runsLate() bool {
	return s.Saturated() || (s.lag != nil && s.lag.Lag() > memReturnLag)
}

// memReturnLag is the lag above which a return of memory waits.
const memReturnLag = 10 * time.Millisecond

// memoryReturned counts a return of memory after a burst, and its CPU.
func (s *Server) memoryReturned(cpu time.Duration) {
	s.metrics.memReturns.Inc()
	s.metrics.memReturnCPU.Add(cpu.Seconds())
	s.log.Debug("returned memory after a burst of sessions", "cpu", cpu, "sessions", s.Sessions())
}

// ServeHTTP upgrades the request to a WebSocket session, which the server
// then serves until it ends (Shutdown and Close wait for it).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if len(s.cfg.Tokens) > 0 && !s.authorized(r) {
		s.metrics.sessionsTotal.WithLabelValues("refused_auth").Inc()
		// No tenant: the token is none of the server's.
		s.log.Debug("session refused", "outcome", "refused_auth", "addr", s.clientAddr(r))
		refuseUnauthorized(w, "missing or invalid access token")
		return
	}
	// The credentials' tenant ("" without tokens), one keyed hash an
	// upgrade. The client counts by it, not by res.tenant: a resumed
	// conversation may go on under the previous build's form of it.
	creds := s.tenantOf(r)
	a := admission{addr: s.clientAddr(r), tenant: creds.id}
	if offered := offeredSubprotocols(r); len(offered) > 0 {
		if !slices.Contains(offered, protocol.Name) {
			s.metrics.sessionsTotal.WithLabelValues("refused_protocol").Inc()
			s.logRefused("refused_protocol", a)
			http.Error(w, fmt.Sprintf("unsupported WebSocket subprotocol %s: this server speaks %s (offer it in "+
				"Sec-WebSocket-Protocol, or offer none)", strings.Join(offered, ", "), protocol.Name), http.StatusBadRequest)
			return
		}
		// Names match exactly (RFC 7936), but the WebSocket library
		// matches without case and would echo "Voiced.V1" offered first:
		// it is left only the name it is to agree to.
		r.Header.Set("Sec-WebSocket-Protocol", protocol.Name)
	}
	res, err := s.resolveConversation(r, creds)
	if err != nil {
		s.refuseResume(w, err, a)
		return
	}
	a.client = clientKey(a.tenant, a.addr)
	if res.asked {
		a.resumes = res.conv
	}
	sess := s.admitOrRefuse(w, a)
	if sess == nil {
		return
	}
	// The store is read with the slot taken: a burst of resumes counts
	// against -max-sessions while it waits for the store.
	if err := s.loadConversation(r.Context(), &res); err != nil {
		s.release(sess)
		s.refuseResume(w, err, a)
		return
	}
	// Chosen when offered; a client offering none is served too, and one
	// offering only others was refused above.
	conn := s.accept(w, r, sess, protocol.Name)
	if conn == nil {
		return
	}
	sess.startConversation(res)
	sess.takeOver()
	if !sess.welcome(conn) {
		s.release(sess)
		return
	}
	// The session runs in a goroutine of its own, owned by the server
	// (s.wg, released when it ends), and the handler returns: net/http's
	// connection state (its 4 KiB read buffer, the request, the handler's
	// deep stack) would otherwise live as long as the session. A session
	// that has nothing to read yet parks at once instead: its goroutine
	// starts when the client sends something.
	if !sess.park() {
		go sess.serve()
	}
}

// upgrade admits a session as a and upgrades the request to its
// WebSocket, offering subprotocols; it answers the refusals itself and
// then returns nil. The caller serves the session and releases it when it
// ends.
func (s *Server) upgrade(w http.ResponseWriter, r *http.Request, a admission, subprotocols ...string) (*Session, *websocket.Conn) {
	sess := s.admitOrRefuse(w, a)
	if sess == nil {
		return nil, nil
	}
	conn := s.accept(w, r, sess, subprotocols...)
	if conn == nil {
		return nil, nil
	}
	return sess, conn
}

// refuseUnauthorized answers 401 with body, and the challenge every 401
// must carry (RFC 9110, 15.5.2): Bearer, the scheme voiced takes tokens
// in.
func refuseUnauthorized(w http.ResponseWriter, body string) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="voiced"`)
	http.Error(w, body, http.StatusUnauthorized)
}

// logRefused logs, at debug level (a client may repeat it at will), the
// refusal of a's session with outcome: with its tenant ("" when it has
// none: a keyed hash, never the token) and address, as its session's
// requests are logged, so that an operator can tell who is refused.
func (s *Server) logRefused(outcome string, a admission) {
	s.log.Debug("session refused", "outcome", outcome, "tenant", a.tenant, "addr", a.addr)
}

// admission is who asks for a session.
type admission struct {
	call    *call  // a phone call; nil: a voiced.v1 session
	client  string // the client it counts against (Config.MaxSessionsPerClient); "": none yet
	tenant  string // the tenant it is answered for (Session.tenant); "": none (yet)
	addr    string // the client's address (ClientAddr), for the log
	resumes string // the conversation a valid resume token names; "": none
}

// admitOrRefuse admits a session as a, or answers the refusal (503, or
// 429 for the client's limit, with Retry-After) and returns nil.
func (s *Server) admitOrRefuse(w http.ResponseWriter, a admission) *Session {
	sess, status := s.admit(a)
	if sess == nil {
		s.metrics.sessionsTotal.WithLabelValues(status).Inc()
		code, retry := http.StatusServiceUnavailable, "1"
		if status == refusedClientLimit {
			code, retry = http.StatusTooManyRequests, clientLimitRetryAfter
		}
		s.logRefused(status, a)
		w.Header().Set("Retry-After", retry)
		http.Error(w, refusals[status], code)
	}
	return sess
}

// accept upgrades the request of the admitted sess to its WebSocket,
// offering subprotocols. It returns nil, having answered the refusal and
// released sess, when the upgrade fails.
func (s *Server) accept(w http.ResponseWriter, r *http.Request, sess *Session, subprotocols ...string) *websocket.Conn {
	hj := &smallBuffers{ResponseWriter: w, parker: &s.parker}
	conn, err := websocket.Accept(hj, r, &websocket.AcceptOptions{
		OriginPatterns: s.cfg.OriginPatterns,
		Subprotocols:   subprotocols,
		// Audio does not compress, and compression costs memory per
		// session.
		CompressionMode: websocket.CompressionDisabled,
	})
	if err != nil {
		// Accept has already written the HTTP error.
		s.release(sess)
		s.metrics.sessionsTotal.WithLabelValues("refused_upgrade").Inc()
		s.log.Debug("websocket upgrade failed", "err", err, "tenant", sess.tenant, "addr", sess.addr)
		return nil
	}
	s.metrics.sessionsTotal.WithLabelValues("accepted").Inc()
	sess.raw, sess.pc, sess.br = hj.conn, hj.pc, hj.br
	hj.pc.ready = sess.serve
	return conn
}

// offeredSubprotocols returns the subprotocols a WebSocket handshake
// offers: every Sec-WebSocket-Protocol header, a comma-separated list of
// tokens with optional white space around them (RFC 6455 4.1, 1#token),
// split exactly as the WebSocket library splits it to choose the one it
// echoes: a value this takes for voiced.v1 is one it agrees to.
func offeredSubprotocols(r *http.Request) []string {
	var out []string
	for _, h := range r.Header.Values("Sec-WebSocket-Protocol") {
		for t := range strings.SplitSeq(h, ",") {
			if t = strings.TrimSpace(t); t != "" {
				out = append(out, t)
			}
		}
	}
	return out
}

// Authorized reports whether r may use the server: it carries one of the
// configured tokens, or none is configured. Other endpoints (the fleet's
// /v1/cluster) authenticate with it like sessions.
func (s *Server) Authorized(r *http.Request) bool {
	return len(s.cfg.Tokens) == 0 || s.authorized(r)
}

// authorized reports whether r carries one of the configured tokens. Each
// comparison takes constant time so a token cannot be guessed by timing.
func (s *Server) authorized(r *http.Request) bool {
	tok := bearer(r)
	return s.validToken(tok)
}

// validToken reports whether tok is one of the configured tokens, in
// constant time for each. Their digests are compared, not the tokens:
// ConstantTimeCompare returns at once for lengths that differ, which
// would tell a token's length.
func (s *Server) validToken(tok string) bool {
	if tok == "" {
		return false
	}
	got := sha256.Sum256([]byte(tok))
	ok := 0
	for _, want := range s.cfg.Tokens {
		w := sha256.Sum256([]byte(want))
		ok |= subtle.ConstantTimeCompare(got[:], w[:])
	}
	return ok == 1
}

// bearer returns the access token r presents: Authorization: Bearer (the
// scheme in any case, RFC 7235), or the access_token query parameter. An
// Authorization header of another scheme (a proxy's Basic) does not hide
// the query parameter.
func bearer(r *http.Request) string {
	if scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " "); ok && strings.EqualFold(scheme, "Bearer") {
		return strings.TrimSpace(tok)
	}
	return r.URL.Query().Get("access_token")
}

// admit registers a new session as a unless the server is full or
// draining, or its client holds its limit of sessions.
func (s *Server) admit(a admission) (*Session, string) {
	// Made before the lock, which every upgrade and session end takes: a
	// burst of upgrades queued on it, each holding its handler's buffers
	// and stack, while one made an id (reading the random source) and a
	// logger. A saturated server refuses before making them: it is
	// saturated exactly when upgrades come faster than it can afford.
	if s.Saturated() {
		s.mu.Lock()
		draining := s.draining
		s.mu.Unlock()
		if draining {
			return nil, "refused_shutdown" // so a client goes elsewhere rather than retry
		}
		return nil, "refused_saturated"
	}
	id := uuid.NewString()
	sess := newSession(s, id, s.log.With("session", id))
	// Set before the session is registered, where Shutdown can see it: a
	// call is told of a drain in Twilio's terms, not voiced.v1's.
	sess.call, sess.tenant, sess.addr = a.call, a.tenant, a.addr
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.draining {
		return nil, "refused_shutdown"
	}
	if len(s.sessions) >= s.cfg.MaxSessions {
		return nil, "refused_full"
	}
	if s.Saturated() {
		return nil, "refused_saturated"
	}
	// Last: a refusal for the server's state (full, saturated) is retried
	// on another instance, one for the client's own sessions is not.
	if !s.claimClientLocked(sess, a.client, a.resumes) {
		return nil, refusedClientLimit
	}
	s.sessions[sess] = struct{}{}
	s.memory.admit()
	s.wg.Add(1)
	if !s.reaping && s.cfg.IdleTimeout > 0 {
		s.reaping = true
		s.reaper.Go(s.reap)
	}
	s.metrics.sessions.Inc()
	return sess, ""
}

// refusedClientLimit is the outcome of a session refused because its
// client holds Config.MaxSessionsPerClient sessions: HTTP 429.
const refusedClientLimit = "refused_client_limit"

// refusals are the bodies of the 503 and 429 answers, by admission outcome.
var refusals = map[string]string{
	"refused_full":      "too many sessions",
	"refused_shutdown":  "server shutting down",
	"refused_saturated": "server saturated: try again shortly",
	refusedClientLimit:  "too many sessions for this client: try again once one of them ends",
}

// Saturated reports whether the server refuses new work for load (new
// sessions, new requests, and readiness checks).
func (s *Server) Saturated() bool { return s.cfg.Load != nil && s.cfg.Load.Saturated() }

// terminalMargin is how long before its deadline a request gives up, as
// of now: TerminalMargin, grown by lagFactor times the process's recent
// lag up to MaxTerminalMargin (see Config.TerminalMargin).
func (s *Server) terminalMargin() time.Duration {
	m := s.cfg.TerminalMargin
	if s.lag == nil {
		return m
	}
	return max(m, min(m+lagFactor*s.lag.Lag(), s.cfg.MaxTerminalMargin))
}

// admitRequest reports whether a new request may start for load: not
// while saturated, or within the limit of a requestAdmitter.
func (s *Server) admitRequest() bool {
	if a, ok := s.cfg.Load.(requestAdmitter); ok {
		return a.AdmitRequest(s.InFlight())
	}
	return !s.Saturated()
}

func (s *Server) release(sess *Session) {
	s.mu.Lock()
	delete(s.sessions, sess)
	s.releaseClientLocked(sess)
	if of := slices.DeleteFunc(s.convs[sess.conv], func(o *Session) bool { return o == sess }); len(of) > 0 {
		s.convs[sess.conv] = of
	} else {
		delete(s.convs, sess.conv)
	}
	s.mu.Unlock()
	s.metrics.sessions.Dec()
	s.wg.Done()
}

// Full reports whether the server holds -max-sessions sessions: a new
// one is refused (503) until one ends.
func (s *Server) Full() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.sessions) >= s.cfg.MaxSessions
}

// Sessions returns the number of open sessions.
func (s *Server) Sessions() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.sessions)
}

// InFlight returns the number of requests accepted and not yet ended.
func (s *Server) InFlight() int { return int(s.inFlight.Load()) }

// InstanceID is the id this server announces in session.ready.
func (s *Server) InstanceID() string { return s.cfg.InstanceID }

// Draining reports whether Shutdown has begun.
func (s *Server) Draining() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.draining
}

// ErrShuttingDown is the cause of a forced shutdown.
var ErrShuttingDown = errors.New("server shutting down")

// Shutdown stops accepting sessions and requests, lets in-flight requests
// finish within their deadlines, and closes every session with status
// 1012 (service restart) once it is idle. If ctx ends first, the remaining requests are
// cancelled with cause shutdown and the sessions closed at once. It
// returns when every session has ended.
func (s *Server) Shutdown(ctx context.Context) error {
	closeIn := time.Duration(0)
	if d, ok := ctx.Deadline(); ok {
		closeIn = max(time.Until(d), 0)
	}
	for _, sess := range s.beginDrain() {
		sess.drain(closeIn)
	}
	done := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		s.stop(ErrShuttingDown) // nothing is left to cut; this ends the reaper
		s.reaper.Wait()
		s.parker.stop()
		s.memory.stop()
		return nil
	case <-ctx.Done():
		return errors.Join(ctx.Err(), s.Close())
	}
}

// reap closes sessions that have sent no whole message for IdleTimeout:
// a client that upgrades and sends nothing, one that trickles a message a
// byte at a time, or one that went away without closing. One goroutine
// for the server checks every session's last read a few times per
// timeout, so a session costs no timer of its own; it ends when no session
// is left and the next admitted one starts it again.
func (s *Server) reap() {
	// At least 1 ms: a timeout under 4 ns would make the period 0, which
	// time.NewTicker refuses with a panic.
	every := max(min(time.Second, s.cfg.IdleTimeout/4), time.Millisecond)
	tick := time.NewTicker(every)
	defer tick.Stop()
	var idle []*Session
	for {
		var now time.Time
		select {
		case <-s.base.Done():
			s.mu.Lock()
			s.reaping = false
			s.mu.Unlock()
			return
		case now = <-tick.C:
		}
		idle = idle[:0]
		s.mu.Lock()
		if len(s.sessions) == 0 {
			s.reaping = false
			s.mu.Unlock()
			return
		}
		for sess := range s.sessions {
			if now.Sub(sess.lastRead()) > s.cfg.IdleTimeout {
				idle = append(idle, sess)
			}
		}
		s.mu.Unlock()
		for _, sess := range idle {
			sess.expire(s.cfg.IdleTimeout)
		}
	}
}

// beginDrain refuses new sessions from now on and returns the open ones.
func (s *Server) beginDrain() []*Session {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.draining = true
	sessions := make([]*Session, 0, len(s.sessions))
	for sess := range s.sessions {
		sessions = append(sessions, sess)
	}
	return sessions
}

// Close ends every session at once: in-flight requests are cancelled with
// cause shutdown and told so, and sessions close with going-away. After
// closeGrace the connections still open are cut. It returns when every
// session has ended, or, if a stage that ignores its context still holds
// one stuckGrace later, with ErrStuck: the process should then exit
// rather than wait on it.
func (s *Server) Close() error {
	for _, sess := range s.beginDrain() {
		sess.abort()
	}
	done := make(chan struct{})
	go func() { // ends when the sessions do
		s.wg.Wait()
		close(done)
	}()
	timer := time.NewTimer(closeGrace)
	defer timer.Stop()
	select {
	case <-done:
		s.stop(ErrShuttingDown)
		s.reaper.Wait()
		s.parker.stop()
		s.memory.stop()
		return nil
	case <-timer.C:
	}
	s.stop(ErrShuttingDown)
	s.reaper.Wait() // it stops with the base context
	timer.Reset(stuckGrace)
	// Cutting the connections woke every parked session.
	s.parker.stop()
	s.memory.stop()
	select {
	case <-done:
		return nil
	case <-timer.C:
		return fmt.Errorf("%w: %d sessions still open", ErrStuck, s.Sessions())
	}
}

// ErrStuck is returned by Close when sessions did not end in time, which
// only a stage that ignores its context can cause.
var ErrStuck = errors.New("sessions stuck in a stage that ignores cancellation")

// stuckGrace is how long Close waits after cutting connections.
const stuckGrace = time.Second

// closeGrace is how long Close lets sessions send their last messages.
const closeGrace = 2 * time.Second
