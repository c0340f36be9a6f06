package loadgen

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/voiced/voiced/internal/audio/mulaw"
	"github.com/voiced/voiced/internal/protocol"
)

// kind is what a turn exercises.
type kind string

const (
	kindPlain      kind = "plain"
	kindCancel     kind = "cancel"
	kindReplace    kind = "replace"
	kindBargeIn    kind = "barge_in"
	kindDisconnect kind = "disconnect"
	kindTurn       kind = "server_turn" // a turn the server detected
)

// attempt is one request as the client opened it. A replaced requestId
// has two attempts; terminal messages are matched to attempts in order.
// Fields after mu-guarded are guarded by the conn's mu.
type attempt struct {
	id     string
	kind   kind
	opened time.Time
	done   chan struct{} // closed on the first terminal message

	// guarded by conn.mu:
	lastSend   time.Time
	finalSent  time.Time
	deadlineAt int64         // server ms, of the final frame
	deadline   time.Time     // local clock equivalent of deadlineAt
	cancelSent time.Time     // when a cancel message was sent
	term       *terminal     // the first terminal message
	extraTypes []string      // types of messages after the terminal
	extraTerm  int           // terminal messages after the first
	excusable  bool          // extras may answer frames or a cancel in flight
	events     int           // non-terminal messages before the terminal
	firstSent  time.Time     // the first frame's send
	finalText  time.Time     // arrival of the final transcript
	firstDelta time.Time     // arrival of the first answer.delta
	firstAudio time.Time     // arrival of the first answer.audio
	audioBytes int           // PCM bytes of answer.audio
	audioSeq   int64         // the next answer.audio seq expected
	audioFinal bool          // the final answer.audio came
	audioBad   bool          // answer.audio out of order, after its final, or no final before a result
	gone       goneReason    // why a missing terminal is expected
	offset     time.Duration // the conn's clock offset, for the report
}

type goneReason string

const (
	goneNone         goneReason = ""
	goneDisconnect   goneReason = "client_disconnect" // we dropped the connection
	goneServerClosed goneReason = "server_closed"     // the server closed it
)

// terminal is a request's terminal message as received.
type terminal struct {
	typ      string // protocol.TypeResult or protocol.TypeError
	code     string // "result" or the error code
	message  string // of an error
	at       time.Time
	degraded bool
	reasons  []string
	// budgetDeadlineAt is the server's effective deadline, reported in
	// results.
	budgetDeadlineAt int64
}

// conn is one WebSocket session: its reader goroutine matches server
// messages to attempts; any goroutine may send.
type conn struct {
	r         *runner
	ws        *websocket.Conn
	ready     protocol.SessionReady
	offset    time.Duration // server clock minus local clock
	rtt       time.Duration // round trip of the ping the offset came from
	budget    time.Duration
	cancelCtx context.CancelFunc
	dead      chan struct{} // closed when the reader ends
	readerWG  sync.WaitGroup

	mu      sync.Mutex
	byID    map[string][]*attempt // guarded by mu
	turns   []*attempt            // server turns detected, in order; guarded by mu
	closing bool                  // guarded by mu; we are dropping the connection
	// draining: the server said session.draining; no new request starts.
	draining atomic.Bool
	ending   bool // guarded by mu; the run is over and closes it
}

// dial opens a session, reads session.ready, aligns clocks and starts the
// reader.
func (r *runner) dial(ctx context.Context) (*conn, error) {
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	opts := websocket.DialOptions{Subprotocols: []string{protocol.Name}}
	if r.cfg.Token != "" {
		opts.HTTPHeader = http.Header{"Authorization": {"Bearer " + r.cfg.Token}}
	}
	ws, resp, err := websocket.Dial(dctx, r.url, &opts)
	if err != nil {
		if resp != nil {
			if resp.StatusCode == http.StatusUnauthorized {
				return nil, fmt.Errorf("dial: HTTP 401: the server wants a bearer token; set VOICELOAD_TOKEN")
			}
			return nil, fmt.Errorf("dial: HTTP %d", resp.StatusCode)
		}
		return nil, fmt.Errorf("dial: %w", err)
	}
	if ws.Subprotocol() != protocol.Name {
		ws.CloseNow()
		return nil, fmt.Errorf("dial: the server did not agree to subprotocol %s", protocol.Name)
	}
	ws.SetReadLimit(4 << 20)
	c := &conn{r: r, ws: ws, byID: make(map[string][]*attempt), dead: make(chan struct{})}
	if err := c.handshake(dctx); err != nil {
		ws.CloseNow()
		return nil, err
	}
	if r.cfg.Speech {
		if err := c.askSpeech(dctx); err != nil {
			ws.CloseNow()
			return nil, err
		}
	}
	if err := c.setUp(dctx); err != nil {
		ws.CloseNow()
		return nil, err
	}
	lctx, lcancel := context.WithCancel(context.WithoutCancel(ctx))
	c.cancelCtx = lcancel
	c.readerWG.Go(func() { c.readLoop(lctx) })
	return c, nil
}

// handshake reads session.ready and aligns the clocks: the offset comes
// from the ping with the shortest round trip, taken at its midpoint.
func (c *conn) handshake(ctx context.Context) error {
	_, b, err := c.ws.Read(ctx)
	if err != nil {
		return fmt.Errorf("read session.ready: %w", err)
	}
	if err := decodeAs(b, protocol.TypeSessionReady, &c.ready); err != nil {
		return err
	}
	if c.ready.Protocol != protocol.Name {
		return fmt.Errorf("server speaks %q, want %q", c.ready.Protocol, protocol.Name)
	}
	c.budget = time.Duration(c.ready.MaxBudgetMs) * time.Millisecond
	if c.r.cfg.Budget > 0 && (c.budget <= 0 || c.r.cfg.Budget < c.budget) {
		c.budget = c.r.cfg.Budget
	}
	const pings = 5
	c.rtt = -1
	for range pings {
		t0 := time.Now()
		p, _ := json.Marshal(protocol.Ping{Type: protocol.TypePing, ClientTime: protocol.Millis(t0)})
		if err := c.ws.Write(ctx, websocket.MessageText, p); err != nil {
			return fmt.Errorf("ping: %w", err)
		}
		var pong protocol.Pong
		for {
			_, b, err := c.ws.Read(ctx)
			if err != nil {
				return fmt.Errorf("read pong: %w", err)
			}
			m, err := protocol.DecodeServer(b)
			if err != nil {
				return err
			}
			if m.Type == protocol.TypePong {
				if err := m.As(&pong); err != nil {
					return fmt.Errorf("decode pong: %w", err)
				}
				break
			}
		}
		t1 := time.Now()
		rtt := t1.Sub(t0)
		if c.rtt < 0 || rtt < c.rtt {
			c.rtt = rtt
			mid := t0.Add(rtt / 2)
			// serverTime is whole milliseconds, truncated: its true value
			// is half a millisecond later on average.
			server := protocol.Time(pong.ServerTime).Add(500 * time.Microsecond)
			c.offset = server.Sub(mid)
		}
	}
	return nil
}

// askSpeech turns speech on for the session: binary, 16 kHz, the
// default voice.
func (c *conn) askSpeech(ctx context.Context) error {
	if c.ready.Speech == nil {
		return errors.New("-speech: the server offers no speech (no speech in session.ready)")
	}
	if err := c.ws.Write(ctx, websocket.MessageText, []byte(`{"type":"session.update","speech":{"sampleRate":16000,"encoding":"binary"}}`)); err != nil {
		return fmt.Errorf("session.update speech: %w", err)
	}
	return nil
}

// audioChunk is what the reader keeps of one answer.audio.
type audioChunk struct {
	seq   int64
	bytes int
	final bool
}

// serverNow is the server's clock now, in protocol milliseconds.
func (c *conn) serverNow() int64 { return protocol.Millis(time.Now().Add(c.offset)) }

// localTime converts protocol time on the server's clock to local time.
func (c *conn) localTime(ms int64) time.Time { return protocol.Time(ms).Add(-c.offset) }

// readLoop owns reads until the connection ends.
func (c *conn) readLoop(ctx context.Context) {
	defer close(c.dead)
	for {
		typ, b, err := c.ws.Read(ctx)
		if err != nil {
			c.lost()
			return
		}
		at := time.Now()
		if typ == websocket.MessageBinary {
			h, pcm, err := protocol.DecodeAnswerAudio(b, true)
			if err != nil {
				c.r.sessionError("undecodable_audio")
				continue
			}
			c.deliver(protocol.ServerMessage{Type: h.Type, RequestID: h.RequestID}, at,
				&audioChunk{seq: h.Seq, bytes: 2 * len(pcm), final: h.Final})
			continue
		}
		m, err := protocol.DecodeServer(b)
		if err != nil {
			c.r.sessionError("undecodable_message")
			continue
		}
		switch {
		case m.Type == protocol.TypePong:
		case m.Type == protocol.TypeSessionDraining:
			// The server is shutting down: start nothing more here.
			c.draining.Store(true)
		case m.RequestID == "":
			if m.Type == protocol.TypeError {
				var e protocol.ErrorMessage
				_ = m.As(&e)
				c.r.sessionError(string(e.Code))
			} else {
				c.r.sessionError("unexpected_" + m.Type)
			}
		default:
			c.deliver(m, at, nil)
		}
	}
}

// deliver matches a request's message to its oldest attempt still
// waiting for a terminal message; au is an answer.audio's chunk.
func (c *conn) deliver(m protocol.ServerMessage, at time.Time, au *audioChunk) {
	c.mu.Lock()
	defer c.mu.Unlock()
	as := c.byID[m.RequestID]
	if len(as) == 0 && m.Type == protocol.TypeSpeechStarted && c.r.cfg.Turns == TurnsServer {
		as = c.turnStarted(m.RequestID, at)
	}
	if len(as) == 0 {
		c.r.sessionError("unknown_request_id")
		return
	}
	var a *attempt
	for _, x := range as {
		if x.term == nil {
			a = x
			break
		}
	}
	isTerm := protocol.Terminal(m.Type)
	if a != nil && m.Type == protocol.TypeSpeechStopped {
		c.turnStopped(a, at)
	}
	if a == nil {
		last := as[len(as)-1]
		last.extraTypes = append(last.extraTypes, describe(m))
		if isTerm {
			last.extraTerm++
			c.r.extraTerminals.Add(1)
		}
		return
	}
	if !isTerm {
		a.events++
		switch m.Type {
		case protocol.TypeTranscript:
			var tr protocol.Transcript
			if a.finalText.IsZero() && m.As(&tr) == nil && tr.Final {
				a.finalText = at
			}
		case protocol.TypeAnswerDelta:
			if a.firstDelta.IsZero() {
				a.firstDelta = at
			}
		case protocol.TypeAnswerAudio:
			if au == nil || au.seq != a.audioSeq || a.audioFinal {
				a.audioBad = true
			}
			if au != nil {
				if a.firstAudio.IsZero() {
					a.firstAudio = at
				}
				a.audioSeq++
				a.audioBytes += au.bytes
				a.audioFinal = au.final
			}
		}
		return
	}
	if a.audioSeq > 0 && !a.audioFinal && m.Type == protocol.TypeResult {
		a.audioBad = true // a result's audio ends with its final chunk
	}
	t := &terminal{typ: m.Type, at: at}
	if m.Type == protocol.TypeResult {
		var res protocol.Result
		if err := m.As(&res); err == nil {
			t.code = "result"
			t.degraded = res.Degraded
			t.reasons = res.Degradation
			t.budgetDeadlineAt = res.Budget.DeadlineAt
		} else {
			t.code = "undecodable_result"
		}
	} else {
		var e protocol.ErrorMessage
		if err := m.As(&e); err == nil {
			t.code, t.message = string(e.Code), e.Message
		} else {
			t.code = "undecodable_error"
		}
	}
	a.term = t
	// A terminal message that arrives while frames or a cancel of the
	// request may still be on their way can be followed by errors
	// answering those: the server cannot know the client has not seen
	// the terminal yet.
	a.excusable = a.finalSent.IsZero() || !a.cancelSent.IsZero()
	if d := a.deadlineOf(); !d.IsZero() && t.at.After(d) {
		c.r.late.Add(1)
	}
	c.r.ended.Add(1)
	close(a.done)
}

// deadlineOf is the deadline a terminal message must beat: the server's
// effective deadline when a result reports it, else the deadlineAt of
// the final frame. It is zero when the final frame was not sent, as
// no deadline is set before it. Call with the conn's mu held, or once
// the run is over.
func (a *attempt) deadlineOf() time.Time {
	if a.finalSent.IsZero() {
		return time.Time{}
	}
	if a.term != nil && a.term.budgetDeadlineAt > 0 {
		return protocol.Time(a.term.budgetDeadlineAt).Add(-a.offset)
	}
	return a.deadline
}

// lost marks every attempt still waiting as gone with the connection.
func (c *conn) lost() {
	c.mu.Lock()
	defer c.mu.Unlock()
	why := goneServerClosed
	switch {
	case c.ending:
		// Whatever still waits has waited out its grace: it stays missing.
		return
	case c.closing:
		why = goneDisconnect
	default:
		c.r.serverCloses.Add(1)
	}
	for _, as := range c.byID {
		for _, a := range as {
			if a.term == nil && a.gone == goneNone {
				a.gone = why
				c.r.gone.Add(1)
			}
		}
	}
}

// open registers a new attempt under id.
func (c *conn) open(id string, k kind) *attempt {
	a := &attempt{id: id, kind: k, opened: time.Now(), done: make(chan struct{}), offset: c.offset}
	c.mu.Lock()
	c.byID[id] = append(c.byID[id], a)
	c.mu.Unlock()
	c.r.record(a)
	return a
}

// errStopped says a request's sending stopped early because it already
// ended or its connection is gone.
var errStopped = errors.New("request ended or connection gone")

// send streams the utterance as a's frames, paced in real time unless
// the run is fast. stopAfter > 0 stops after that many frames (for a
// disconnect mid-utterance).
func (c *conn) send(ctx context.Context, a *attempt, u Utterance, stopAfter int) error {
	frames := u.Frames()
	rate := 0
	if u.SampleRate != c.ready.Audio.SampleRate {
		rate = u.SampleRate
	}
	var (
		buf   []byte
		timer *time.Timer
	)
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	start := time.Now()
	for i, pcm := range frames {
		if stopAfter > 0 && i >= stopAfter {
			return nil
		}
		if i > 0 && !c.r.cfg.Fast {
			// Pace against the start so that frames do not drift.
			d := time.Until(start.Add(time.Duration(i) * FrameDuration))
			if timer == nil {
				timer = time.NewTimer(d)
			} else {
				timer.Reset(d)
			}
			select {
			case <-ctx.Done():
				return context.Cause(ctx)
			case <-a.done:
				return errStopped
			case <-c.dead:
				return errStopped
			case <-timer.C:
			}
		}
		select {
		case <-a.done:
			return errStopped
		case <-c.dead:
			return errStopped
		default:
		}
		final := i == len(frames)-1
		h := protocol.AudioHeader{RequestID: a.id, DeadlineAt: c.serverNow() + c.budget.Milliseconds(),
			Seq: int64(i), Final: final, SampleRate: rate}
		var err error
		if c.r.cfg.MuLaw {
			buf, err = protocol.EncodeBinaryAudio(buf[:0], h, nil)
			buf = mulaw.AppendEncode(buf, pcm)
		} else {
			buf, err = protocol.EncodeBinaryAudio(buf[:0], h, pcm)
		}
		if err != nil {
			return fmt.Errorf("encode frame: %w", err)
		}
		// Recorded before the write: the terminal message can be read
		// before Write returns.
		now := time.Now()
		c.mu.Lock()
		a.lastSend = now
		if i == 0 {
			a.firstSent = now
		}
		if final {
			a.finalSent = now
			a.deadlineAt = h.DeadlineAt
			a.deadline = c.localTime(h.DeadlineAt)
		}
		c.mu.Unlock()
		if err := c.write(ctx, websocket.MessageBinary, buf); err != nil {
			return err
		}
		c.r.frames.Add(1)
	}
	return nil
}

// write sends one message; a failed write drops the connection, so that
// the reader ends and the session is re-dialled.
func (c *conn) write(ctx context.Context, typ websocket.MessageType, b []byte) error {
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := c.ws.Write(wctx, typ, b); err != nil {
		c.ws.CloseNow()
		return fmt.Errorf("write: %w", err)
	}
	return nil
}

// cancel sends a cancel message for a, unless it already ended.
func (c *conn) cancel(ctx context.Context, a *attempt) error {
	c.mu.Lock()
	if a.term != nil {
		c.mu.Unlock()
		return nil
	}
	a.cancelSent = time.Now()
	c.mu.Unlock()
	b, _ := json.Marshal(protocol.Cancel{Type: protocol.TypeCancel, RequestID: a.id})
	return c.write(ctx, websocket.MessageText, b)
}

// supersede sends a session.update switching supersede on or off.
func (c *conn) supersede(ctx context.Context, on bool) error {
	b, _ := json.Marshal(protocol.SessionUpdate{Type: protocol.TypeSessionUpdate, Supersede: &on})
	return c.write(ctx, websocket.MessageText, b)
}

// wait waits for a's terminal message, for its connection to end, or
// until Grace after its deadline, whichever comes first.
func (c *conn) wait(ctx context.Context, a *attempt) {
	c.mu.Lock()
	limit := a.deadline
	c.mu.Unlock()
	if limit.IsZero() {
		// The final frame was not sent: the request ended early, or the
		// connection broke. Either is already signalled; wait a budget
		// at most.
		limit = time.Now().Add(c.budget)
	}
	c.pause(ctx, a, time.Until(limit.Add(c.r.cfg.Grace)))
}

// pause waits d, or less if a ends, the connection ends or ctx is done.
func (c *conn) pause(ctx context.Context, a *attempt, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-a.done:
	case <-c.dead:
	case <-ctx.Done():
	case <-t.C:
	}
}

// drop closes the connection abruptly, as a client that goes away
// mid-request, and waits for the reader.
func (c *conn) drop() {
	c.mu.Lock()
	c.closing = true
	c.mu.Unlock()
	c.ws.CloseNow()
	c.cancelCtx()
	c.readerWG.Wait()
}

// close ends the session normally and waits for the reader.
func (c *conn) close() {
	c.mu.Lock()
	c.ending = true
	c.mu.Unlock()
	// Close waits for the server's close frame, which the reader reads.
	_ = c.ws.Close(websocket.StatusNormalClosure, "load run done")
	c.cancelCtx()
	c.readerWG.Wait()
}

// alive reports whether the connection is still up and open to new
// requests (not draining).
func (c *conn) alive() bool {
	if c.draining.Load() {
		return false
	}
	select {
	case <-c.dead:
		return false
	default:
		return true
	}
}

// describe names a message for the report: its type, and its code for
// an error.
func describe(m protocol.ServerMessage) string {
	if m.Type != protocol.TypeError {
		return m.Type
	}
	var e protocol.ErrorMessage
	_ = m.As(&e)
	return m.Type + ":" + string(e.Code) + " (" + e.Message + ")"
}

func decodeAs(b []byte, typ string, v any) error {
	m, err := protocol.DecodeServer(b)
	if err != nil {
		return err
	}
	if m.Type != typ {
		if m.Type == protocol.TypeError {
			var e protocol.ErrorMessage
			_ = m.As(&e)
			return fmt.Errorf("server error instead of %s: %s: %s", typ, e.Code, e.Message)
		}
		return fmt.Errorf("got %q, want %s", m.Type, typ)
	}
	if err := m.As(v); err != nil {
		return fmt.Errorf("decode %s: %w", typ, err)
	}
	return nil
}
