package session

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/coder/websocket"
	"golang.org/x/sync/errgroup"

	"github.com/voiced/voiced/internal/cancel"
	"github.com/voiced/voiced/internal/pipeline"
	"github.com/voiced/voiced/internal/protocol"
)

// outMsg is one message for the writer: data to send, or, when close is
// set, the close status to end the session with once everything queued
// before it has been sent.
type outMsg struct {
	data  []byte
	close *closeStatus
}

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

	out  chan outMsg      // bounded outbound queue, read by the writer
	kick chan closeStatus // urgent close (slow client), capacity 1
	reqs cancel.Registry[*request]
	wg   sync.WaitGroup // request goroutines

	// Owned by the reader goroutine.
	sampleRate int
	supersede  bool

	mu       sync.Mutex
	tomb     []string        // ring of recently ended request ids, guarded by mu
	tombNext int             // guarded by mu
	closing  bool            // a close has been queued; guarded by mu
	draining bool            // guarded by mu
	turns    []pipeline.Turn // the last few exchanges, oldest first; guarded by mu
}

// maxTurns is how many earlier exchanges a session keeps for the answer
// generator.
const maxTurns = 4

// remember records an answered exchange.
func (s *Session) remember(t pipeline.Turn) {
	if t.User == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.turns) == maxTurns {
		copy(s.turns, s.turns[1:])
		s.turns = s.turns[:maxTurns-1]
	}
	s.turns = append(s.turns, t)
}

// history returns a copy of the session's recent exchanges.
func (s *Session) history() []pipeline.Turn {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.turns)
}

func newSession(srv *Server, id string, log *slog.Logger) *Session {
	return &Session{
		srv:        srv,
		id:         id,
		log:        log,
		out:        make(chan outMsg, srv.cfg.OutboundQueue),
		kick:       make(chan closeStatus, 1),
		sampleRate: srv.cfg.SampleRate,
	}
}

// serve runs the session until the connection ends. The reader loop runs
// here; the writer runs in an errgroup goroutine that serve waits for.
func (s *Session) serve(conn *websocket.Conn) {
	conn.SetReadLimit(s.srv.cfg.MaxMessageBytes)
	ctx, stop := context.WithCancelCause(s.srv.base)
	defer stop(nil)

	var g errgroup.Group
	g.Go(func() error { return s.writeLoop(ctx, conn) })

	s.send(protocol.SessionReady{
		Type:        protocol.TypeSessionReady,
		Protocol:    protocol.Name,
		SessionID:   s.id,
		ServerTime:  protocol.Millis(time.Now()),
		MaxBudgetMs: s.srv.pcfg.MaxBudget.Milliseconds(),
		Audio: protocol.AudioFormat{
			Encoding:   protocol.EncodingPCM16LE,
			SampleRate: s.sampleRate,
			Channels:   1,
		},
	})
	s.log.Debug("session started")

	err := s.readLoop(ctx, conn)

	// Teardown, in order: cancel every request (a shutdown if the server
	// is stopping, else the client is gone), wait for their goroutines so
	// nothing writes to the queue any more, then let the writer flush and
	// close.
	cause := cancel.ClientDisconnect
	if context.Cause(ctx) == ErrShuttingDown {
		cause = cancel.Shutdown
	}
	for _, h := range s.reqs.Close(cause) {
		s.endRequest(h.Value, cause, nil)
	}
	s.wg.Wait()
	s.queueClose(websocket.StatusGoingAway, "session ended")
	close(s.out)
	werr := g.Wait()
	conn.CloseNow()

	switch status := websocket.CloseStatus(err); {
	case status == websocket.StatusNormalClosure, status == websocket.StatusGoingAway,
		errors.Is(err, context.Canceled), errors.Is(err, ErrShuttingDown), errors.Is(err, io.EOF):
		s.log.Debug("session ended", "status", status)
	default:
		s.log.Info("session ended", "err", err, "writer_err", werr)
	}
}

// readLoop reads and dispatches messages until the connection fails or
// closes.
func (s *Session) readLoop(ctx context.Context, conn *websocket.Conn) error {
	// A forced shutdown must interrupt the blocked Read.
	stopAfter := context.AfterFunc(s.srv.base, func() { conn.CloseNow() })
	defer stopAfter()
	for {
		typ, msg, err := conn.Read(ctx)
		if err != nil {
			if s.srv.base.Err() != nil {
				return ErrShuttingDown
			}
			return err
		}
		arrival := time.Now()
		switch typ {
		case websocket.MessageBinary:
			a, err := protocol.DecodeBinaryAudio(msg)
			if err != nil {
				s.badInput(err, "")
				continue
			}
			s.handleAudio(ctx, &a, arrival)
		case websocket.MessageText:
			s.handleText(ctx, msg, arrival)
		}
	}
}

func (s *Session) handleText(ctx context.Context, msg []byte, arrival time.Time) {
	m, err := protocol.DecodeText(msg)
	if err != nil {
		s.badInput(err, "")
		return
	}
	switch m := m.(type) {
	case *protocol.Audio:
		s.handleAudio(ctx, m, arrival)
	case *protocol.Cancel:
		h, ok := s.reqs.Get(m.RequestID)
		if !ok {
			if !s.tombstoned(m.RequestID) {
				s.badInput(protocol.Errorf(protocol.CodeBadMessage, "cancel: no request %q in flight", m.RequestID), "")
			}
			// A cancel racing the request's end is normal: it already
			// has its terminal message.
			return
		}
		s.endRequest(h.Value, cancel.Cancelled, nil)
	case *protocol.SessionUpdate:
		if m.SampleRate != nil {
			s.sampleRate = *m.SampleRate
		}
		if m.Supersede != nil {
			s.supersede = *m.Supersede
		}
	case *protocol.Ping:
		s.send(protocol.Pong{Type: protocol.TypePong, ClientTime: m.ClientTime, ServerTime: protocol.Millis(time.Now())})
	}
}

// badInput reports a refused message. With id empty the error is a
// session-level one; otherwise it is the terminal message of a request
// that was never accepted.
func (s *Session) badInput(err error, id string) {
	pe, ok := errors.AsType[*protocol.Error](err)
	if !ok {
		pe = protocol.Errorf(protocol.CodeInternal, "%v", err)
	}
	s.srv.metrics.badInput.WithLabelValues(string(pe.Code)).Inc()
	s.log.Debug("bad input", "code", pe.Code, "err", pe.Message, "request", id)
	s.send(protocol.ErrorMessage{Type: protocol.TypeError, RequestID: id, Code: pe.Code, Message: pe.Message})
}

// refuse answers the first frame of a request that is not accepted, and
// remembers the id so that the rest of its frames are ignored.
func (s *Session) refuse(id string, code protocol.Code, format string, args ...any) {
	s.srv.metrics.terminals.WithLabelValues(protocol.TypeError, string(code)).Inc()
	s.addTombstone(id)
	s.badInput(protocol.Errorf(code, format, args...), id)
}

// send queues a message for the writer. It never blocks: when the queue is
// full the client is not reading, and the session is closed with a policy
// violation rather than stalling the pipeline. It reports whether the
// message was queued.
func (s *Session) send(v any) bool {
	data, err := json.Marshal(v)
	if err != nil {
		// Only our own types are sent: this is a programming error.
		s.log.Error("encode message", "err", err)
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return false
	}
	select {
	case s.out <- outMsg{data: data}:
		return true
	default:
		s.closing = true
		s.srv.metrics.slowClients.Inc()
		select {
		case s.kick <- closeStatus{websocket.StatusPolicyViolation, errSlowClient.Error()}:
		default:
		}
		return false
	}
}

// queueClose queues a close after everything already queued.
func (s *Session) queueClose(code websocket.StatusCode, reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return
	}
	s.closing = true
	select {
	case s.out <- outMsg{close: &closeStatus{code, reason}}:
	default:
		select {
		case s.kick <- closeStatus{code, reason}:
		default:
		}
	}
}

// writeLoop sends queued messages until the queue is closed or a close is
// asked for. It is the only goroutine that writes to conn.
func (s *Session) writeLoop(ctx context.Context, conn *websocket.Conn) error {
	closeConn := func(c closeStatus) error {
		// Close waits (bounded) for the peer's close frame; the reader
		// sees the connection end and tears the session down.
		return conn.Close(c.code, c.reason)
	}
	for {
		select {
		case c := <-s.kick:
			return closeConn(c)
		case m, ok := <-s.out:
			if !ok {
				return nil
			}
			if m.close != nil {
				return closeConn(*m.close)
			}
			wctx, cancelW := context.WithTimeout(ctx, s.srv.cfg.WriteTimeout)
			err := conn.Write(wctx, websocket.MessageText, m.data)
			cancelW()
			if err != nil {
				conn.CloseNow()
				return err
			}
		}
	}
}

// abort ends the session now: every request is cancelled with cause
// shutdown (its terminal message says unavailable), then the session
// closes with going-away once those are sent.
func (s *Session) abort() {
	s.mu.Lock()
	s.draining = true
	s.mu.Unlock()
	for _, h := range s.reqs.Close(cancel.Shutdown) {
		s.endRequest(h.Value, cancel.Shutdown, nil)
	}
	s.queueClose(websocket.StatusGoingAway, "server shutting down")
}

// drain begins a graceful shutdown of the session: no new requests, and
// a going-away close once the in-flight ones have ended.
func (s *Session) drain() {
	s.mu.Lock()
	s.draining = true
	s.mu.Unlock()
	s.closeIfDrained()
}

func (s *Session) isDraining() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.draining
}

func (s *Session) closeIfDrained() {
	if s.isDraining() && s.reqs.Len() == 0 {
		s.queueClose(websocket.StatusGoingAway, "server shutting down")
	}
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
