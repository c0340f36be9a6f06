package session

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/voiced/voiced/internal/cancel"
	"github.com/voiced/voiced/internal/pipeline"
	"github.com/voiced/voiced/internal/protocol"
)

type closeStatus struct {
	code   websocket.StatusCode
	reason string
}

// errSlowClient is the session's end when its outbound queue overflows.
var errSlowClient = errors.New("client is not reading: outbound queue full")

// Session is one client connection.
type Session struct {
	srv *Server
	id  string
	log *slog.Logger

	// out[outHead:] is the bounded outbound queue (cfg.OutboundQueue
	// messages), guarded by mu, taken by the writer. A slice rather than a
	// channel: a channel of that capacity would hold 6.5 KiB for the
	// session's life once anything was sent, a slice only what is queued
	// (see popLocked). A nil entry asks the writer to close with closeWith
	// once everything queued before it has been sent.
	out       []outbound
	outHead   int
	outBytes  int64           // the data bytes in out[outHead:]; guarded by mu
	writingB  int64           // the data bytes of the message the writer writes now; guarded by mu
	link      *link           // answer audio's pacing, made with the first chunk; guarded by mu
	sent      atomic.Int64    // bytes written to the connection as frames, for link
	closeWith closeStatus     // set once, under mu, before the nil entry is queued
	kick      *closeStatus    // urgent close (slow client) for the writer; guarded by mu
	conn      *websocket.Conn // guarded by mu until set, then read-only
	raw       net.Conn        // under conn, for write deadlines; set before serving
	pc        *parkedConn     // raw as coder/websocket holds it, for parking; set before serving
	br        *bufio.Reader   // coder/websocket's read buffer; set before serving
	ctx       context.Context // the session's; set with conn
	writers   sync.WaitGroup  // the writer goroutine, while it runs
	reqs      cancel.Registry[*request]
	wg        sync.WaitGroup // request goroutines

	// stop ends ctx, and unwatch undoes the forced shutdown's cut of the
	// connection; set by welcome before serve starts, then read-only.
	stop    context.CancelCauseFunc
	unwatch func() bool

	// Owned by the reader goroutine.
	sampleRate int
	supersede  bool
	speech     *protocol.SpeechSettings // nil: speech off
	inbound    protocol.Inbound         // how audio messages are read
	call       *call                    // a Twilio phone call; nil: a voiced.v1 session; set before serving
	stream     *turnStream              // server turn detection; nil: the client's turns
	turnN      int                      // server turns found so far, for their ids

	// lastMsg is when the last whole message was read (the upgrade until
	// the first), Unix nanoseconds, for the server's reaper.
	lastMsg atomic.Int64

	mu          sync.Mutex
	tomb        []string   // ring of recently ended request ids, guarded by mu
	tombNext    int        // guarded by mu
	closing     bool       // a close has been queued; guarded by mu
	draining    bool       // guarded by mu
	lingerUntil time.Time  // a draining session stays open until then; guarded by mu
	aborted     bool       // abort queues the close itself (going away); guarded by mu
	resending   bool       // a re-sent id's new request is not registered yet: no drain close (resend); guarded by mu
	writing     bool       // a writer runs; guarded by mu
	inline      bool       // the reader writes what it queues now itself (writeInline): no writer is started; guarded by mu
	writeErr    error      // why the writer stopped, if it failed; guarded by mu
	turns       []exchange // the last few exchanges, oldest first; guarded by mu
	spoken      []*spoken  // the most recent requests, for playback, oldest first; guarded by mu
	// detached: the connection is gone; terminals go to missed, for the
	// conversation's next session. Guarded by mu.
	detached bool
	missed   [][]byte // guarded by mu
	// saving holds the one save of the history in progress (see
	// saveConversation); made at the first save, guarded by mu.
	saving chan struct{}
	// cutSaving: a save of a history a playback report cut runs
	// (saveCut); cutDirty: a cut is not in a save yet. Guarded by mu.
	cutSaving, cutDirty bool

	// The conversation, set before the session is ready, then read-only.
	conv string
	// tenants: the id it issues tokens to and saves under, and the forms
	// whose conversations it may read. A phone call whose token comes in
	// its start sets it then, under mu, before any of its requests.
	tenants     tenants
	resumed     bool // its history was found
	resumeAsked bool // the client presented a resume token
	storeAway   bool // the store's shared storage did not answer at the upgrade
	answered    int  // turns of the conversation answered (Conversation.Answered); guarded by mu
	stored      int  // the most turns answered of the store's copies its history took in (load, catch-up); guarded by mu
	// flushedLast: the last flush of the terminals s missed is done (or
	// running): no more are handed to it; guarded by mu.
	flushedLast bool
	// tenant is the client its requests are answered for (the LLM's cost
	// cap per tenant): its token's tenant (tenantOf), twilioAccount for
	// a call Twilio signed, "" without tokens. Owned by the reader
	// goroutine: set before the session serves, or by a call's start.
	tenant string
	// addr is the client's address (ClientAddr), logged with tenant
	// where a request is refused; read-only.
	addr string
	// client is what the session counts against of
	// Config.MaxSessionsPerClient ("": nothing); guarded by the server's
	// mu.
	client string
	// seq orders the server's sessions by when they were made: of two
	// sessions of one conversation, the later is the client's newer
	// connection (see attach). Read-only.
	seq uint64
}

// exchange is one answered request in the history.
type exchange struct {
	id string
	pipeline.Turn
}

// maxTurns is how many earlier exchanges a session keeps for the answer
// generator.
const maxTurns = 4

// remember records an answered exchange, and what was spoken of its
// answer (nil without speech) for playback. It returns the save that
// makes the history durable, to run without locks before the result is
// queued; nil when the history did not change. A turn the save could not
// make durable is counted once (voiced_history_not_durable_total),
// however many saves it took.
func (s *Session) remember(id string, t pipeline.Turn, speech *pipeline.Speech) func(context.Context) {
	save := s.rememberAs(id, t, speech, 0)
	if save == nil {
		return nil
	}
	return func(ctx context.Context) {
		if err := save(ctx); err != nil {
			s.srv.metrics.historyUnsaved.Inc()
			// Debug: the store's own loss is logged once where it is noticed.
			s.log.Debug("history not durable before the result", "err", err)
		}
	}
}

// rememberAs is remember, whose save returns the error of the newest
// save carrying the turn rather than count it; handed, when not 0, is
// the turn's place in the conversation (Answered) as the session that
// answered it counted it (handOff).
func (s *Session) rememberAs(id string, t pipeline.Turn, speech *pipeline.Speech, handed int) func(context.Context) error {
	n, changed := s.rememberLocked(id, t, speech, handed)
	if !changed {
		return nil
	}
	if live := s.srv.liveSession(s.conv); live != nil && live != s {
		// The client has resumed on another session of this process
		// meanwhile: the turn joins that session's history.
		return live.handOff(t, n)
	}
	return func(ctx context.Context) error {
		err := s.saveConversation(ctx)
		// A session resuming the conversation in this process may have
		// read the store before this save and registered after the look
		// above: it gets the turn too, unless it has it, and its save,
		// the newer, decides whether the turn is durable.
		if live := s.srv.liveSession(s.conv); live != nil && live != s {
			if save := live.handOff(t, n); save != nil {
				err = save(ctx)
			}
		}
		return err
	}
}

// handOff adds a turn another session of the conversation answered, as
// its n-th, to s's history, unless s holds it already (its load or
// catch-up read it from the store), and returns the save as rememberAs
// does.
func (s *Session) handOff(t pipeline.Turn, n int) func(context.Context) error {
	return s.rememberAs("", t, nil, n)
}

// rememberLocked is remember's bookkeeping under mu; it reports whether
// the history changed (the save then reads it as it is when it runs), and
// the turn's place in the conversation.
//
// A turn handed over as the conversation's handed-th is held already
// when s holds an equal turn and read a copy of the store that counts
// that many: the handing session saved it before s's load or catch-up.
// By content alone, a repeat (a greeting asked twice: two turns) was
// taken for the turn held, and dropped.
func (s *Session) rememberLocked(id string, t pipeline.Turn, speech *pipeline.Speech, handed int) (n int, changed bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if handed > 0 && s.stored >= handed && slices.ContainsFunc(s.turns, func(e exchange) bool { return e.Turn == t }) {
		return 0, false
	}
	sp := s.spokenLocked(id)
	if sp != nil && speech != nil {
		// Kept only with speech: there is nothing to cut otherwise.
		sp.answer, sp.speech = t.Assistant, speech
	}
	if t.User == "" {
		return 0, false
	}
	if len(s.turns) == maxTurns {
		copy(s.turns, s.turns[1:])
		s.turns = s.turns[:maxTurns-1]
	}
	s.turns = append(s.turns, exchange{id: id, Turn: t})
	s.answered++
	if sp != nil {
		sp.turn = true
		s.cutLocked(sp) // a playback report that came before the result
	}
	return s.answered, true
}

// history returns a copy of the session's recent exchanges.
func (s *Session) history() []pipeline.Turn {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.turnsLocked()
}

func newSession(srv *Server, id string, log *slog.Logger) *Session {
	s := &Session{
		srv:        srv,
		id:         id,
		log:        log,
		sampleRate: srv.cfg.SampleRate,
		seq:        srv.sessionSeq.Add(1),
	}
	s.lastMsg.Store(time.Now().UnixNano())
	return s
}

func (s *Session) lastRead() time.Time { return time.Unix(0, s.lastMsg.Load()) }

// expire closes a session that has been idle for d: with 1001 once what
// is queued has been sent. A client that does not answer the close (a
// reader stuck in a trickled message) is cut off when the WebSocket
// library's close handshake times out, 5 s later.
func (s *Session) expire(d time.Duration) {
	s.mu.Lock()
	conn, closing := s.conn, s.closing
	s.mu.Unlock()
	if conn == nil {
		return // not ready yet: serve closes it if the ready write fails
	}
	if closing {
		// Closed already (by an earlier look of the reaper, which sees it
		// idle on every tick until the close handshake is over): counted once.
		return
	}
	s.log.Debug("closing idle session", "idle", d)
	s.srv.metrics.idleCloses.Inc()
	s.queueClose(websocket.StatusGoingAway, "idle timeout: no message for "+d.String())
}

// welcome makes the session ready: it writes session.ready, publishes
// the connection to the writer, and makes the session its conversation's
// live one. It reports false, having closed the connection, when
// session.ready could not be written; otherwise the caller runs serve.
//
// It runs on the HTTP handler's goroutine, which ends right after, rather
// than on the session's: encoding session.ready and the rest are deep
// one-off work, and a goroutine that blocks in a read for as long as its
// client stays keeps whatever stack that work grew (see serve).
func (s *Session) welcome(conn *websocket.Conn) bool {
	conn.SetReadLimit(s.srv.cfg.MaxMessageBytes)
	ctx, stop := context.WithCancelCause(s.srv.base)
	// A forced shutdown must interrupt the blocked read, and writes.
	unwatch := context.AfterFunc(s.srv.base, func() { s.cut(conn) })
	// session.ready is written here, before the connection is published
	// to the writer, so it is always the first message; an idle session
	// then has neither an outbound queue nor a writer.
	ready, err := json.Marshal(protocol.SessionReady{
		Type:           protocol.TypeSessionReady,
		Protocol:       protocol.Name,
		SessionID:      s.id,
		Instance:       s.srv.cfg.InstanceID,
		ConversationID: s.conv,
		ResumeToken:    s.srv.issueToken(s.conv, s.tenants.id),
		Resumed:        s.resumed,
		ServerTime:     protocol.Millis(time.Now()),
		MaxBudgetMs:    s.srv.cfg.MaxBudget.Milliseconds(),
		Audio: protocol.AudioFormat{
			Encoding:   protocol.EncodingPCM16LE,
			SampleRate: s.sampleRate,
			Channels:   1,
		},
		Speech: s.srv.speechInfo(),
	})
	if err == nil {
		err = s.writeType(conn, websocket.MessageText, ready)
	}
	if err != nil {
		conn.CloseNow()
		unwatch()
		stop(nil)
		s.log.Debug("session ended before it was ready", "err", err)
		return false
	}
	s.endWrites()
	s.stop, s.unwatch = stop, unwatch
	s.ready(ctx, conn)
	s.log.Debug("session started")
	s.attach(ctx)
	return true
}

// cut closes the connection at once, whatever it is doing. CloseNow alone
// does not when a close handshake has begun (the writer's Close, waiting
// for the peer's close frame): coder/websocket then waits for that
// handshake, up to 5 s, and a client that answers none (it stopped
// reading, or its network is gone) would hold the session past a forced
// shutdown's grace. Closing the connection beneath ends the handshake's
// read.
func (s *Session) cut(conn *websocket.Conn) {
	if s.pc != nil {
		s.pc.Close()
	}
	conn.CloseNow()
}

// serve runs the session until the connection ends, then releases it
// from the server. The reader loop runs here; the writer runs in a
// goroutine of its own while there is something to send (an idle session
// has no writer), and serve waits for it.
//
// An idle session costs little more than this goroutine's stack, blocked
// in the read. The blocked read needs a 4 KiB stack, but handling a
// message can grow it (encoding/json is deep), and the runtime halves a
// stack only when less than a quarter of it is in use, which the blocked
// read is not on 8 KiB: a goroutine that grew once would keep 8 KiB or
// more for the rest of the session. So after any message but an audio
// frame that is not a request's last (control messages, a request's final
// frame, errors: a few per request, never one per frame) the loop goes
// on in a fresh goroutine, which starts on a 2 KiB stack, and this one
// ends.
func (s *Session) serve() {
	err := s.readLoop(s.ctx, s.conn)
	if err == errFreshStack {
		if !s.park() {
			go s.serve()
		}
		return
	}
	s.closeTurns()
	s.teardown(s.ctx, s.conn, err)
	// Watched until teardown is over: its writer's close handshake waits
	// for a peer that may never answer, which a forced shutdown must cut.
	s.unwatch()
	s.detachLive()
	s.stop(nil)
	s.srv.release(s)
}

// park ends the reader goroutine of an idle session, to be started again
// when the connection becomes readable or closes (see parker). It parks
// whenever serve would go on in a fresh goroutine (see serve), requests
// in flight or not, unless the session detects turns itself or is a phone
// call (those stream audio without pause), or bytes are buffered. The
// buffers are the reader's, except in a close handshake, in which
// coder/websocket reads from the writer's goroutine; that begins only
// once a close is queued, so closing is checked under mu first.
func (s *Session) park() bool {
	if s.pc == nil || s.call != nil || s.stream != nil {
		return false
	}
	s.mu.Lock()
	idle := !s.closing && s.br.Buffered() == 0 && !s.pc.buffered()
	s.mu.Unlock()
	return idle && s.srv.parker.park(s.pc)
}

// errFreshStack asks serve to go on reading in a fresh goroutine.
var errFreshStack = errors.New("continue on a fresh stack")

// ready publishes the connection to the writer.
func (s *Session) ready(ctx context.Context, conn *websocket.Conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.conn, s.ctx = conn, ctx
	// A close may have been queued before the connection was ready
	// (the server was closed while this session was being accepted).
	if s.queuedLocked() > 0 || s.kick != nil {
		s.startWriterLocked()
	}
}

// teardown ends a session whose reader has returned with err.
func (s *Session) teardown(ctx context.Context, conn *websocket.Conn, err error) {
	// Teardown, in order: end the requests (all of them, with shutdown,
	// if the server is stopping; else the client is gone, and those whose
	// final frame has arrived run on to a terminal kept for a resumed
	// session), wait for their goroutines so nothing writes to the queue
	// any more, then let the writer flush and close.
	if errors.Is(context.Cause(ctx), ErrShuttingDown) {
		for _, h := range s.reqs.Close(cancel.Shutdown) {
			s.endRequest(h.Value, cancel.Shutdown, nil)
		}
	} else {
		s.lostConnection()
	}
	s.wg.Wait()
	// Every request has ended: what the client missed goes on now, not
	// after the close handshake, which a vanished peer lets time out.
	s.flushMissed()
	s.queueClose(websocket.StatusGoingAway, "session ended")
	s.writers.Wait()
	conn.CloseNow()
	s.flushMissed() // what the writer could not send
	s.mu.Lock()
	werr, closing, closed := s.writeErr, s.closing, s.closeWith
	if s.kick != nil {
		closed = *s.kick // an urgent close (a slow client's 1008) was sent instead
	}
	s.mu.Unlock()

	// A close frame without a status code (1005) or a connection that
	// ends cleanly (EOF) is a normal end too.
	switch status := websocket.CloseStatus(err); {
	case status == websocket.StatusNormalClosure, status == websocket.StatusGoingAway,
		status == websocket.StatusNoStatusRcvd,
		errors.Is(err, context.Canceled), errors.Is(err, ErrShuttingDown), errors.Is(err, io.EOF),
		errors.Is(err, errCallEnded):
		s.log.Debug("session ended", "status", status)
	case closing && (status == closed.code || status == -1 && werr == nil && errors.Is(err, net.ErrClosed)):
		// The client answered the close this server sent (1003, 1008,
		// 1009...): said as such, not as the library's read error. When
		// the writer's close handshake read the answer (the reader was
		// parked, or between messages), the reader finds the connection
		// closed under it, the handshake having succeeded (no writer
		// error).
		s.log.Info("session closed by the server", "status", closed.code, "reason", closed.reason)
	default:
		s.log.Info("session ended", "err", err, "writer_err", werr)
	}
}

// readLoop reads and dispatches messages until the connection fails or
// closes, or until a message after which it should go on on a fresh stack
// (errFreshStack, see serve).
func (s *Session) readLoop(ctx context.Context, conn *websocket.Conn) error {
	for {
		// Read with a context that is never done: coder/websocket arms a
		// context watcher per read otherwise, a cost per audio frame. Every
		// way a session ends closes the connection, which ends the read.
		typ, buf, arrival, err := s.readNext(conn)
		if err != nil {
			return err
		}
		fresh := true
		switch typ {
		case websocket.MessageBinary:
			a, err := s.inbound.DecodeBinaryAudio(*buf)
			if err != nil {
				s.audioError(&a, err)
			} else {
				s.handleAudio(ctx, &a, arrival)
				fresh = a.Header.Final
			}
		case websocket.MessageText:
			fresh = s.handleText(ctx, *buf, arrival)
		}
		// Nothing keeps the message: the PCM is copied into samples and
		// decoded strings are copies.
		putBuffer(buf)
		if fresh {
			return errFreshStack
		}
	}
}

// readNext reads the next whole message into a pooled buffer (return it
// with putBuffer) and notes its arrival for the reaper.
func (s *Session) readNext(conn *websocket.Conn) (websocket.MessageType, *[]byte, time.Time, error) {
	typ, buf, err := readMessage(conn)
	if err != nil {
		if s.srv.base.Err() != nil {
			return 0, nil, time.Time{}, ErrShuttingDown
		}
		return 0, nil, time.Time{}, err
	}
	arrival := time.Now()
	s.lastMsg.Store(arrival.UnixNano())
	return typ, buf, arrival, nil
}

// Inbound messages are read into pooled buffers rather than a new slice
// each, and an idle session holds none.
var buffers = sync.Pool{New: func() any { b := make([]byte, 0, 2048); return &b }}

// maxPooled is the largest buffer kept for reuse: audio frames are well
// under it, and a rare large message should not pin its memory.
const maxPooled = 64 << 10

func putBuffer(b *[]byte) {
	if cap(*b) <= maxPooled {
		*b = (*b)[:0]
		buffers.Put(b)
	}
}

// readMessage reads the next message into a pooled buffer, which the
// caller returns with putBuffer.
func readMessage(conn *websocket.Conn) (websocket.MessageType, *[]byte, error) {
	typ, r, err := conn.Reader(context.Background())
	if err != nil {
		return 0, nil, err
	}
	bp := buffers.Get().(*[]byte)
	b := (*bp)[:0]
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			*bp = b
			return typ, bp, nil
		}
		if err != nil {
			*bp = b
			putBuffer(bp)
			return 0, nil, err
		}
	}
}

// handleText handles a text message; it reports whether the reader
// should go on on a fresh stack: after anything but an audio frame that
// is not a request's last (see serve).
func (s *Session) handleText(ctx context.Context, msg []byte, arrival time.Time) (fresh bool) {
	fresh = true // the bare returns below
	m, err := s.inbound.DecodeText(msg)
	if err != nil {
		if a, ok := m.(*protocol.Audio); ok {
			s.audioError(a, err)
			return
		}
		s.badInput(err, "")
		return
	}
	switch m := m.(type) {
	case *protocol.Audio:
		s.handleAudio(ctx, m, arrival)
		return m.Header.Final
	case *protocol.Cancel:
		h, ok := s.reqs.Get(m.RequestID)
		if ok && h.Value.hasEnded() {
			// Its terminal is on its way (the history save before a
			// result may take a while): nothing to cancel, and the reader
			// must not wait for it.
			return
		}
		if !ok {
			if !s.tombstoned(m.RequestID) {
				s.badInput(protocol.Errorf(protocol.CodeBadMessage, "cancel: no request %q in flight", m.RequestID), "")
			}
			// A cancel racing the request's end is normal: it already
			// has its terminal message.
			return
		}
		h.Value.cancelRead.Store(arrival.UnixNano())
		s.sendInline(func() { s.endRequest(h.Value, cancel.Cancelled, nil) })
	case *protocol.SessionUpdate:
		// Checked first: a refused update changes nothing.
		st, set, err := s.srv.speechSettings(m)
		applyTurns := func() {}
		if err == nil {
			applyTurns, err = s.prepareTurns(m)
		}
		if err != nil {
			s.badInput(err, "")
			return
		}
		if set {
			s.speech = st
		}
		if m.SampleRate != nil {
			s.sampleRate = *m.SampleRate
		}
		if m.Supersede != nil {
			s.supersede = *m.Supersede
		}
		applyTurns()
	case *protocol.Playback:
		s.playback(m)
	case *protocol.Ping:
		s.send(protocol.Pong{Type: protocol.TypePong, ClientTime: m.ClientTime, ServerTime: protocol.Millis(time.Now())})
	}
	return
}

// badInput reports a refused message. With id empty the error is a
// session-level one; otherwise it is the terminal message of a request
// that was never accepted.
func (s *Session) badInput(err error, id string) { s.reportError(err, id, latency{}) }

// reportError sends err as an error message for id ("" for the session),
// measuring took once it is written.
func (s *Session) reportError(err error, id string, took latency) {
	pe, ok := errors.AsType[*protocol.Error](err)
	if !ok {
		pe = protocol.Errorf(protocol.CodeInternal, "%v", err)
	}
	s.srv.metrics.badInput.WithLabelValues(string(pe.Code)).Inc()
	// A first frame refused (overloaded, unavailable) is logged here only:
	// with the client, as its request would have been.
	s.log.Debug("bad input", "code", pe.Code, "err", pe.Message, "request", id, "tenant", s.tenant, "addr", s.addr)
	// With an id, the message is the request's terminal: never dropped.
	s.sendAs(protocol.ErrorMessage{Type: protocol.TypeError, RequestID: id, Code: pe.Code, Message: pe.Message},
		outbound{terminal: id != "", took: took})
}

// audioError reports an audio message that failed validation. When its
// header names a request (a valid requestId) the error is that request's:
// it ends the request in flight, or refuses the request its first frame
// would have opened. Otherwise it is a session-level error.
func (s *Session) audioError(a *protocol.Audio, err error) {
	if s.stream != nil {
		s.streamError(a, err)
		return
	}
	pe, ok := errors.AsType[*protocol.Error](err)
	id := a.Header.RequestID
	if !ok || !protocol.ValidRequestID(id) {
		s.badInput(err, "")
		return
	}
	if hd, ok := s.reqs.Get(id); ok {
		if hd.Value.hasEnded() {
			// Its terminal is decided (maybe waiting for its history
			// save): ignored, as the frames of ended requests are.
			return
		}
		s.srv.metrics.badInput.WithLabelValues(string(pe.Code)).Inc()
		s.endRequest(hd.Value, nil, pe)
		return
	}
	switch {
	case a.Header.Seq == 0:
		s.refuse(id, pe.Code, "%s", pe.Message) // refuse counts it
	case s.tombstoned(id):
		// A frame of a request that already has its terminal message.
	default:
		s.badInput(err, "")
	}
}

// refuse answers the first frame of a request that is not accepted, and
// remembers the id so that the rest of its frames are ignored.
func (s *Session) refuse(id string, code protocol.Code, format string, args ...any) {
	s.refuseTimed(id, latency{}, protocol.Errorf(code, format, args...))
}

// refuseTimed is refuse, measuring took once the refusal is written.
func (s *Session) refuseTimed(id string, took latency, pe *protocol.Error) {
	s.srv.metrics.terminals.WithLabelValues(protocol.TypeError, string(pe.Code)).Inc()
	s.addTombstone(id)
	s.reportError(pe, id, took)
}

// send queues a message for the writer. It never blocks: when the queue is
// full the client is not reading, and the session is closed with a policy
// violation rather than stalling the pipeline. It reports whether the
// message was queued.
func (s *Session) send(v any) bool { return s.sendAs(v, outbound{}) }

// sendAs is send with o's settings (a terminal message, a latency to
// measure); o.data is v encoded.
func (s *Session) sendAs(v any, o outbound) bool {
	e, ok := s.encode(v)
	if !ok {
		return false
	}
	o.data, o.play = e.data, e.play
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sendLocked(o)
}

// outbound is one queued message. A nil data asks the writer to close.
type outbound struct {
	data []byte
	// terminal marks a request's terminal message (or a refusal, the
	// terminal of a request never accepted): it is never dropped. One
	// that cannot be written is kept for the conversation's next session.
	terminal bool
	// deadline, for a request's terminal message, is when it must have
	// been written by: the writer checks it, as the last to touch it.
	deadline time.Time
	// binary sends data as a binary message (answer.audio).
	binary bool
	// took, when set, is what the writer measures once it has written the
	// message: the time to first audio, from a cancel read to its
	// terminal, from a refused request's first frame to its refusal.
	took latency
	// play, on a phone call, is what the message is to Twilio's
	// playback (audio, a mark after it): the call's state follows it once
	// it is queued (call.follow).
	play playback
}

// latency is a time the writer measures: from since to the message
// written, observed into to (nil: nothing to measure).
type latency struct {
	since time.Time
	to    prometheus.Observer
}

// deliver sends a request's terminal message (nil: none) and releases its
// registration in one step under mu. closeIfDrained holds mu across its
// own check, so a drain cannot see the request gone and queue the close
// before its terminal message, and a client that has the terminal message
// finds the request id free.
//
// stop, when not nil, cancels the request's work with that cause;
// otherwise its context is released. It reports whether the message was
// kept rather than queued because the connection is gone (detached): the
// caller then hands it on (flushMissed) once it holds no lock.
func (s *Session) deliver(h *cancel.Handle[*request], stop *cancel.Cause, msg any, deadline time.Time, took latency) (kept bool) {
	var o outbound
	if msg != nil {
		o, _ = s.encode(msg) // nothing to send: no data
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if stop != nil {
		h.Cancel(stop)
	} else {
		h.Release()
	}
	if o.data != nil {
		o.terminal, o.deadline, o.took = true, deadline, took
		s.sendLocked(o)
		kept = s.detached
	}
	return kept
}

// encode marshals one of the protocol's messages into what is queued of
// it; on a phone call, what Twilio is to get of it (false: nothing).
func (s *Session) encode(v any) (outbound, bool) {
	if s.call != nil {
		return s.call.translate(v)
	}
	data, err := json.Marshal(v)
	if err != nil {
		// Only our own types are sent: this is a programming error.
		s.log.Error("encode message", "err", err)
		return outbound{}, false
	}
	return outbound{data: data}, true
}

// sendLocked queues a message for the writer; s.mu must be held.
func (s *Session) sendLocked(o outbound) bool {
	if s.detached {
		if o.terminal {
			s.keepMissedLocked(o.data)
		}
		return false
	}
	if s.closing {
		if o.terminal {
			return s.beforeCloseLocked(o)
		}
		return false
	}
	if s.queuedLocked() >= s.srv.cfg.OutboundQueue {
		if o.terminal {
			s.keepMissedLocked(o.data)
		}
		s.closing = true
		s.srv.metrics.slowClients.Inc()
		s.kickLocked(closeStatus{websocket.StatusPolicyViolation, errSlowClient.Error()})
		s.startWriterLocked()
		return false
	}
	s.pushLocked(o)
	if s.call != nil {
		s.call.follow(o.play)
	}
	if !s.inline {
		s.startWriterLocked()
	}
	return true
}

// maxInline is the most messages the reader writes itself (writeInline)
// before it leaves the rest to a writer goroutine, so that it goes back to
// reading soon.
const maxInline = 8

// sendInline runs f, which queues messages (a cancelled request's
// terminal, a refusal), and then writes them on this goroutine, the
// reader's, when no writer runs. A writer goroutine started for them
// waits in the scheduler's run queue, and on a saturated process that is
// tens of milliseconds (a cancel's terminal waited up to 25 ms at 1,000
// sessions, where its write took under 0.1 ms).
func (s *Session) sendInline(f func()) {
	s.mu.Lock()
	s.inline = true
	s.mu.Unlock()
	f()
	s.writeInline()
}

// writeInline writes what was queued during sendInline, up to maxInline
// messages, unless a writer runs; a writer goroutine takes over anything
// left, a close or a kick (a close waits for the peer's close frame, which
// only the reader reads).
func (s *Session) writeInline() {
	s.mu.Lock()
	s.inline = false
	if s.writing || s.conn == nil || s.queuedLocked() == 0 {
		s.mu.Unlock()
		return
	}
	s.writing = true
	s.mu.Unlock()
	s.writeQueued(true)
}

// beforeCloseLocked queues a terminal message that comes after the
// session queued its close (a request refused while draining, whose first
// frame was read after the 1012 close was queued): ahead of the close
// while the writer has not taken it, within the queue's bound; otherwise
// the close frame may be out already, and the message is kept for the
// conversation's next session, which receives it once (flushMissed, at
// teardown). s.mu must be held; it reports whether o was queued.
func (s *Session) beforeCloseLocked(o outbound) bool {
	n := s.queuedLocked()
	if s.kick == nil && n > 0 && n <= s.srv.cfg.OutboundQueue && s.out[len(s.out)-1].data == nil {
		s.pushLocked(outbound{}) // the close moves back by one
		s.out[len(s.out)-2] = o
		s.outBytes += int64(len(o.data))
		if s.call != nil {
			s.call.follow(o.play)
		}
		s.startWriterLocked()
		return true
	}
	s.keepMissedLocked(o.data)
	return false
}

// queuedLocked is the number of queued messages; s.mu must be held.
func (s *Session) queuedLocked() int { return len(s.out) - s.outHead }

// pushLocked queues o; s.mu must be held. Taken entries are dropped from
// the front before the array would grow, so a writer that keeps up but
// never quite drains the queue does not make it grow without bound.
func (s *Session) pushLocked(o outbound) {
	if len(s.out) == cap(s.out) && s.outHead > 0 {
		n := copy(s.out, s.out[s.outHead:])
		clear(s.out[n:])
		s.out, s.outHead = s.out[:n], 0
	}
	s.out = append(s.out, o)
	s.outBytes += int64(len(o.data))
}

// popLocked takes the oldest queued message; s.mu must be held. A drained
// queue keeps its array for the next burst unless a backlog made it large:
// an idle session then holds a few entries' worth at most.
func (s *Session) popLocked() (outbound, bool) {
	if s.queuedLocked() == 0 {
		return outbound{}, false
	}
	o := s.out[s.outHead]
	s.out[s.outHead] = outbound{}
	s.outHead++
	s.outBytes -= int64(len(o.data))
	if s.outHead == len(s.out) {
		s.outHead = 0
		s.out = s.out[:0]
		if cap(s.out) > keptOutbound {
			s.out = nil
		}
	}
	return o, true
}

// closeNextLocked reports whether the next queued entry asks for the
// close; s.mu must be held.
func (s *Session) closeNextLocked() bool {
	return s.queuedLocked() > 0 && s.out[s.outHead].data == nil
}

// keptOutbound is the most queue entries a drained queue keeps.
const keptOutbound = 4

// kickLocked asks the writer to close at once, unless it already is
// asked to; s.mu must be held.
func (s *Session) kickLocked(c closeStatus) {
	if s.kick == nil {
		s.kick = &c
	}
}

// linkFits reports whether n more bytes of answer audio, after what is
// queued and what the connection still carries, can reach the client by
// until (see link). A deadline not known yet (zero) paces nothing.
func (s *Session) linkFits(now time.Time, n int64, until time.Time) bool {
	if until.IsZero() {
		return true
	}
	s.mu.Lock()
	if s.link == nil {
		s.link = newLink(s.raw)
	}
	// The message being written counts whole, though part of it may be in
	// the kernel already (and counted there too): a 48 kHz base64 chunk
	// is 25 KB.
	l, queued := s.link, s.outBytes+s.writingB
	s.mu.Unlock()
	return l.fits(now, s.sent.Load(), queued, n, until)
}

// backlogged reports whether the outbound queue is at least half full.
func (s *Session) backlogged() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return 2*s.queuedLocked() >= s.srv.cfg.OutboundQueue
}

// startWriterLocked starts the writer unless it runs or the connection
// is not ready yet. s.mu must be held.
func (s *Session) startWriterLocked() {
	if !s.writing && s.conn != nil {
		s.writing = true
		s.writers.Go(s.writeLoop)
	}
}

// maxCloseReason is the longest reason a close frame carries (RFC 6455:
// 125 bytes of payload less the status code). The library refuses a
// longer one and sends 1011 without a reason instead, or, in its close
// handshake, nothing at all.
const maxCloseReason = 123

// closeReason cuts reason to maxCloseReason bytes, at a character
// boundary: a reason may quote the peer's own text.
func closeReason(reason string) string {
	if len(reason) <= maxCloseReason {
		return reason
	}
	return protocol.Truncate(reason, maxCloseReason-len("…"))
}

// queueClose queues a close after everything already queued.
func (s *Session) queueClose(code websocket.StatusCode, reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queueCloseLocked(code, reason)
}

func (s *Session) queueCloseLocked(code websocket.StatusCode, reason string) {
	if s.closing {
		return
	}
	s.closing = true
	reason = closeReason(reason)
	s.closeWith = closeStatus{code, reason}
	defer s.startWriterLocked()
	if s.queuedLocked() < s.srv.cfg.OutboundQueue {
		s.pushLocked(outbound{})
		return
	}
	s.kickLocked(closeStatus{code, reason})
}

// writeLoop sends queued messages until the queue is empty, a close is
// asked for, or a write fails. Senders start it when they queue a message
// and no writer runs; the writer is it, or the reader writing what it
// queued itself (writeInline), never both (writing, under mu).
func (s *Session) writeLoop() { s.writeQueued(false) }

// writeQueued is the writer's turn: it sends queued messages until the
// queue is empty, a close is asked for, or a write fails. On the reader
// (inline) it sends at most maxInline and no close: a writer goroutine
// takes over the rest, the close or the kick, with writing still set.
func (s *Session) writeQueued(inline bool) {
	for n := 0; ; n++ {
		s.mu.Lock()
		s.writingB = 0 // the last message, if any, is written
		if s.kick == nil && s.queuedLocked() == 0 {
			// Stop when nothing is queued, deciding under mu: a sender
			// holding it has seen writing set and not started another,
			// and the next writer's deadline is not cleared by this one.
			s.endWrites()
			s.writing = false
			s.mu.Unlock()
			return
		}
		if inline && (n == maxInline || s.kick != nil || s.closeNextLocked()) {
			s.writers.Go(s.writeLoop)
			s.mu.Unlock()
			return
		}
		if c := s.kick; c != nil {
			// Nothing queued will be sent: its terminals are kept.
			for o, ok := s.popLocked(); ok; o, ok = s.popLocked() {
				if o.data != nil && o.terminal {
					s.keepMissedLocked(o.data)
				}
			}
			s.mu.Unlock()
			s.writerDone(s.closeConn(*c))
			return
		}
		o, _ := s.popLocked()
		s.writingB = int64(len(o.data))
		c := s.closeWith
		s.mu.Unlock()
		if o.data == nil {
			// Close waits (bounded) for the peer's close frame; the
			// reader sees the connection end and tears the session down.
			s.writerDone(s.closeConn(c))
			return
		}
		if !s.writeOne(o) {
			return
		}
	}
}

// writeOne writes o and measures what it carries; on a failed write it
// closes the connection, keeps o for a resumed session and reports false:
// the writer is done.
func (s *Session) writeOne(o outbound) bool {
	typ := websocket.MessageText
	if o.binary {
		typ = websocket.MessageBinary
	}
	if err := s.writeType(s.conn, typ, o.data); err != nil {
		s.conn.CloseNow()
		s.writerDone(err)
		s.keepUnsent(o)
		return false
	}
	s.sent.Add(frameBytes(len(o.data)))
	if !o.deadline.IsZero() {
		s.terminalWritten(o.deadline, o.data)
	}
	if o.took.to != nil {
		o.took.to.Observe(time.Since(o.took.since).Seconds())
	}
	return true
}

// terminalWritten checks a terminal message just written, data, against
// its request's deadline.
func (s *Session) terminalWritten(deadline time.Time, data []byte) {
	m := s.srv.metrics
	slack := time.Until(deadline)
	m.slackSeconds.Observe(max(slack, 0).Seconds())
	if slack < 0 {
		m.late.Inc()
		// Which request and what ended it, read back from the message (a
		// rare path): never its transcript or answer.
		var what struct {
			Type      string `json:"type"`
			RequestID string `json:"requestId"`
			Code      string `json:"code"`
		}
		_ = json.Unmarshal(data, &what)
		s.log.Warn("terminal message written after its deadline", "late", -slack,
			"request", what.RequestID, "type", what.Type, "code", what.Code)
	}
}

// writeType sends one message of type typ, bounded by the write timeout;
// endWrites lifts the bound once no write follows.
//
// The bound is the connection's write deadline rather than a context:
// coder/websocket arms a watcher per write on a context that can end and
// keeps the last write's context, which cost seven allocations and two
// timers per message and half a KiB for as long as the session lasts. A
// write past its deadline fails, and the writer then closes the
// connection; a forced shutdown closes it, which ends a write too.
func (s *Session) writeType(conn *websocket.Conn, typ websocket.MessageType, data []byte) error {
	if err := s.armWrite(); err != nil {
		return err
	}
	return conn.Write(context.Background(), typ, data)
}

// armWrite bounds the writes from now by the write timeout.
func (s *Session) armWrite() error {
	return s.raw.SetWriteDeadline(time.Now().Add(s.srv.cfg.WriteTimeout))
}

// closeConn sends the close frame c and waits (bounded) for the peer's.
// The frame is a write of its own, bounded afresh: the deadline of the
// message before it is what that write left, and a slow client that took
// the message in most of the timeout found it passed, the close frame
// was never sent and the client saw the connection end without its code.
func (s *Session) closeConn(c closeStatus) error {
	// A failure here is a closed connection, which Close reports.
	_ = s.armWrite()
	return s.conn.Close(c.code, c.reason)
}

// endWrites lifts the write deadline, so that coder/websocket's own
// writes later (pongs, a close) do not find it passed.
func (s *Session) endWrites() { s.raw.SetWriteDeadline(time.Time{}) }

// writerDone records why the writer stopped for good; no writer starts
// after it, since nothing more can be sent.
func (s *Session) writerDone(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closing = true
	if s.writeErr == nil {
		s.writeErr = err
	}
}

// abort ends the session now: every request is cancelled with cause
// shutdown (its terminal message says unavailable), then the session
// closes with going-away once those are sent.
func (s *Session) abort() {
	s.mu.Lock()
	s.draining, s.aborted = true, true
	s.mu.Unlock()
	for _, h := range s.reqs.Close(cancel.Shutdown) {
		s.endRequest(h.Value, cancel.Shutdown, nil)
	}
	s.queueClose(websocket.StatusGoingAway, "server shutting down")
}

// drain begins a graceful shutdown of the session: no new requests, and
// a going-away close once the in-flight ones have ended.
//
// The client is told (session.draining, with the time left) so that it
// starts no new request, and the session stays open for drainLinger at
// least: a request the client started before it heard is then refused
// with unavailable, a message it receives, rather than cut off by the
// close.
func (s *Session) drain(closeIn time.Duration) {
	// Draining as the client is told, under one hold of mu: a request it
	// sends once it has heard is refused with unavailable, never taken
	// for one sent before the drain (and refused overloaded at the
	// in-flight limit); and no request refused for the drain gets its
	// unavailable ahead of session.draining ("first session.draining").
	o, ok := s.encode(protocol.SessionDraining{Type: protocol.TypeSessionDraining, CloseInMs: closeIn.Milliseconds()})
	s.mu.Lock()
	s.draining = true
	s.lingerUntil = time.Now().Add(drainLinger)
	if ok {
		s.sendLocked(o)
	}
	s.mu.Unlock()
	time.AfterFunc(drainLinger, s.closeIfDrained)
}

// drainLinger is how long a draining session stays open after telling its
// client, for requests already on their way to be answered.
const drainLinger = 500 * time.Millisecond

// closeIfDrained closes a draining session once it has no request in
// flight, no older session of its conversation in this process has one
// either, and its linger is over. It holds mu across the final check, as
// open does across its own check and the registration, so the two cannot
// interleave.
//
// An older session's requests are those whose final frame had arrived
// when the client's earlier connection dropped: they run on, and their
// terminals are handed to this session, the client's connection now
// (handOn). Closed first, it would have them kept for the client's next
// resume. Each ends by its deadline, and then looks here again
// (finishWith); the drain's own time bounds the wait too (Close).
func (s *Session) closeIfDrained() {
	s.mu.Lock()
	drained := s.drainedLocked()
	s.mu.Unlock()
	// Looked at without mu: olderRunning takes the server's.
	if !drained || s.olderRunning() {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.drainedLocked() {
		// 1012 (service restart): the client may reconnect, and resume,
		// at once; the balancer sends it to another instance.
		s.queueCloseLocked(websocket.StatusServiceRestart, "server restarting: reconnect with your resume token")
	}
}

// drainedLocked reports whether s drains, has no request in flight, and
// is past its linger; s.mu must be held.
func (s *Session) drainedLocked() bool {
	return s.draining && !s.aborted && !s.resending && s.reqs.Len() == 0 && !time.Now().Before(s.lingerUntil)
}

// olderRunning reports whether a session of s's conversation older than
// s, in this process, still has a request in flight.
func (s *Session) olderRunning() bool {
	s.srv.mu.Lock()
	defer s.srv.mu.Unlock()
	if s.conv == "" {
		return false // no conversation yet
	}
	for _, o := range s.srv.convs[s.conv] {
		if o.seq < s.seq && o.reqs.Len() > 0 {
			return true
		}
	}
	return false
}

func (s *Session) addTombstone(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tomb == nil {
		s.tomb = make([]string, s.srv.cfg.Tombstones)
	}
	s.tomb[s.tombNext] = id
	s.tombNext = (s.tombNext + 1) % len(s.tomb)
}

func (s *Session) tombstoned(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range s.tomb {
		if t == id {
			return true
		}
	}
	return false
}

func (s *Session) clearTombstone(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, t := range s.tomb {
		if t == id {
			s.tomb[i] = ""
		}
	}
}
