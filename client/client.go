package client

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/voiced/voiced/internal/audio/mulaw"
	"github.com/voiced/voiced/internal/protocol"
)

// Errors of the client. Match them with errors.Is.
var (
	// ErrClosed: Close or CloseNow was called.
	ErrClosed = errors.New("client: closed")
	// ErrConnectionLost: the connection a request was sent on is gone and
	// its terminal message cannot come (no reconnect, a new conversation,
	// or none came by its deadline and Reconnect.TerminalGrace); or the
	// client gave up reconnecting.
	ErrConnectionLost = errors.New("client: connection lost")
	// ErrNoPong: the connection was dropped because a keep-alive ping
	// got no answer (Config.KeepAlive): a network that went away without
	// closing it, which the kernel reports only after minutes.
	ErrNoPong = errors.New("client: keep-alive ping not answered")
	// ErrNotConnected: the client is between connections (reconnecting).
	ErrNotConnected = errors.New("client: not connected")
	// ErrRequestEnded: the request already has its terminal message.
	ErrRequestEnded = errors.New("client: request ended")
	// ErrTooManyRequests: Config.MaxWaiting requests are waiting.
	ErrTooManyRequests = errors.New("client: too many requests waiting")
)

// HTTPError is a refused WebSocket upgrade: the status and the start of
// the server's plain-text explanation.
type HTTPError struct {
	// Status is the HTTP status code of the refusal (401, 503...).
	Status int
	// Body is the start of the response body, trimmed.
	Body       string
	RetryAfter time.Duration // from a Retry-After header in seconds
}

// Error describes the refusal: its status and the server's explanation.
func (e *HTTPError) Error() string {
	msg := fmt.Sprintf("client: dial: HTTP %d %s", e.Status, http.StatusText(e.Status))
	if e.Body != "" {
		msg += ": " + e.Body
	}
	return msg
}

// Reconnect is the reconnection policy. The zero value reconnects with
// the defaults.
type Reconnect struct {
	// Disabled: a lost connection ends the client (Done is closed and
	// waiting requests end with ErrConnectionLost).
	Disabled bool
	// Initial and Max bound the exponential backoff: attempt n waits a
	// random time between half and all of min(Initial x 2^n, Max) (equal
	// jitter), or the server's Retry-After when longer, up to Max.
	// Defaults 100ms, 5s.
	Initial, Max time.Duration
	// Attempts is how many dials one outage may take before the client
	// gives up. Default 10.
	Attempts int
	// TerminalGrace is how long after its deadline (or after the first
	// resume's replay, if later) a request of a lost connection waits for
	// its terminal message on the resumed session before it ends with
	// ErrConnectionLost; later resumes (a flapping connection) do not
	// extend it. The server sends a terminal by the deadline and
	// replays those its client missed; the grace covers the trip and a
	// server that noticed the lost connection late. A terminal that never
	// comes was lost with a killed instance, or written into the dead
	// connection. Default 2s.
	TerminalGrace time.Duration
}

// Config configures a Client. Only URL is required. Zero values take
// the defaults; negative ones are refused by Dial except where a field
// says what they mean (KeepAlive, Pings).
type Config struct {
	// URL is the session endpoint, ws://HOST:PORT/v1/session (or wss://).
	URL string
	// Token is sent as "Authorization: Bearer TOKEN"; empty sends none.
	Token string
	// Header holds extra headers of the upgrade request (Origin, say).
	Header http.Header
	// HTTPClient dials; default http.DefaultClient.
	HTTPClient *http.Client
	// DialTimeout bounds a dial with its session.ready and clock
	// alignment. Default 10s.
	DialTimeout time.Duration
	// WriteTimeout bounds the writes: when a write has waited this long
	// and no write has completed meanwhile, the connection is dropped, as
	// it is when a write fails. Default 5s.
	WriteTimeout time.Duration
	// Pings is the number of pings of each clock alignment. Default 5;
	// negative: none (the offset is then taken as 0), except one on a
	// resumed session, whose pong marks the end of the replayed terminal
	// messages.
	Pings int
	// KeepAlive: when the connection has been quiet this long the client
	// pings, and when the pong has not come this long after, it drops the
	// connection (ErrNoPong) and reconnects: a phone that changed
	// networks leaves a connection the kernel finds dead only after
	// minutes. Default 10s; negative: never.
	KeepAlive time.Duration
	// ReadLimit is the largest message accepted. Default 4 MiB.
	ReadLimit int64
	// MaxWaiting bounds the requests waiting for their terminal message.
	// Default 256.
	MaxWaiting int
	// Reconnect is the reconnection policy.
	Reconnect Reconnect
	// OnUnrouted, when set, gets every message that goes to no request:
	// session-level messages (session.draining, errors without a
	// requestId, unknown types, undecodable messages) and messages whose
	// requestId has no request waiting (after its terminal message, or
	// never opened). It runs on the client's goroutine (on Dial's for
	// the messages read while Dial aligns the clock).
	OnUnrouted func(Event)
	// OnConnect, when set, is called after each connection's
	// session.ready and clock alignment, before any other message of it
	// is read: on Dial's goroutine for the first connection, on the
	// client's for the others. Every session, resumed or not, starts with
	// the server's default settings (a resume continues the
	// conversation, not the settings): re-send session.update here.
	OnConnect func(SessionReady)
	// OnDisconnect, when set, is called when a connection ends without
	// Close, before any reconnection; err says why.
	OnDisconnect func(err error)
	// Logger logs reconnections; default: none. The token is never logged.
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	c.DialTimeout = cmp.Or(c.DialTimeout, 10*time.Second)
	c.WriteTimeout = cmp.Or(c.WriteTimeout, 5*time.Second)
	c.Pings = cmp.Or(c.Pings, 5)
	c.KeepAlive = cmp.Or(c.KeepAlive, 10*time.Second)
	c.ReadLimit = cmp.Or(c.ReadLimit, 4<<20)
	c.MaxWaiting = cmp.Or(c.MaxWaiting, 256)
	c.Reconnect.Initial = cmp.Or(c.Reconnect.Initial, 100*time.Millisecond)
	c.Reconnect.Max = cmp.Or(c.Reconnect.Max, 5*time.Second)
	c.Reconnect.Attempts = cmp.Or(c.Reconnect.Attempts, 10)
	c.Reconnect.TerminalGrace = cmp.Or(c.Reconnect.TerminalGrace, 2*time.Second)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// check refuses what the client cannot honour: a negative duration or
// bound where none is documented (the reconnection's backoff panicked on
// one), and a KeepAlive too short for its ticker (half of it).
func (c Config) check() error {
	r := c.Reconnect
	switch {
	case c.DialTimeout < 0, c.WriteTimeout < 0, c.ReadLimit < 0, c.MaxWaiting < 0:
		return errors.New("client: DialTimeout, WriteTimeout, ReadLimit and MaxWaiting must not be negative")
	case c.KeepAlive > 0 && c.KeepAlive/2 <= 0:
		return errors.New("client: KeepAlive must be negative (none) or at least 2ns")
	case r.Initial < 0, r.Max < 0, r.Attempts < 0, r.TerminalGrace < 0:
		return errors.New("client: Reconnect's Initial, Max, Attempts and TerminalGrace must not be negative")
	}
	return nil
}

// Client is one voiced session, across reconnections. Its methods are
// safe for concurrent use.
type Client struct {
	cfg    Config
	ctx    context.Context // the client's lifetime: dials and reads
	cancel context.CancelFunc
	done   chan struct{} // closed when the client's goroutine ends

	draining atomic.Bool
	lastRead atomic.Int64 // Unix nanoseconds of the last message read

	mu      sync.Mutex
	ws      *websocket.Conn // guarded by mu; nil between connections
	stall   *stallGuard     // guarded by mu; the current connection's
	gen     uint64          // guarded by mu; the connection's number
	ready   SessionReady    // guarded by mu; of the current connection
	offset  time.Duration   // guarded by mu; server clock minus local clock
	rtt     time.Duration   // guarded by mu; of the ping the offset came from
	byID    map[string][]*Request
	waiting int   // guarded by mu; requests in byID
	closing bool  // guarded by mu; Close or CloseNow was called
	err     error // guarded by mu; why the client ended
	// syncs are Sync's waiters, by their ping's clientTime; guarded by mu.
	// Each gets one value, nil for its pong or ErrConnectionLost, and is
	// removed when it does.
	syncs map[int64][]chan error
	// lastSync is the clientTime of the latest Sync's ping; guarded by
	// mu. Each is later than the one before, so that a pong wakes only
	// the Syncs whose ping it follows, even within one millisecond or
	// when the wall clock steps back.
	lastSync int64
	// orphans are the timers giving up on the requests of lost
	// connections that a resumed session did not replay (see orphan);
	// guarded by mu.
	orphans map[*Request]*time.Timer
}

// Dial connects, reads session.ready and aligns the clock. ctx bounds
// the dial only: the client lives until Close, or until its connection
// is lost for good.
func Dial(ctx context.Context, cfg Config) (*Client, error) {
	cfg = cfg.withDefaults()
	if err := cfg.check(); err != nil {
		return nil, err
	}
	u, err := url.Parse(cfg.URL)
	if err != nil || (u.Scheme != "ws" && u.Scheme != "wss") || u.Host == "" {
		return nil, errors.New("client: URL must be ws://HOST[:PORT]/PATH or wss://…")
	}
	lctx, cancel := context.WithCancel(context.Background())
	c := &Client{cfg: cfg, ctx: lctx, cancel: cancel, done: make(chan struct{}), byID: map[string][]*Request{}}
	ws, err := c.connect(ctx, "")
	if err != nil {
		cancel()
		return nil, err
	}
	go c.loop(ws)
	return c, nil
}

// Ready returns the current connection's session.ready, with the resume
// token of its last result when one carried a fresher one.
func (c *Client) Ready() SessionReady {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ready
}

// Offset is the server's clock minus the local clock, and RTT the round
// trip of the ping it was measured with.
func (c *Client) Offset() (offset, rtt time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.offset, c.rtt
}

// ServerTime converts a local time to protocol time on the server's clock.
func (c *Client) ServerTime(t time.Time) int64 {
	off, _ := c.Offset()
	return protocol.Millis(t.Add(off))
}

// LocalTime converts protocol time on the server's clock to local time.
func (c *Client) LocalTime(ms int64) time.Time {
	off, _ := c.Offset()
	return protocol.Time(ms).Add(-off)
}

// DeadlineIn is the deadlineAt that lies d from now on the server's clock.
func (c *Client) DeadlineIn(d time.Duration) int64 {
	return c.ServerTime(time.Now().Add(d))
}

// Draining reports whether the server said session.draining on the
// current connection: it starts no new request there.
func (c *Client) Draining() bool { return c.draining.Load() }

// Done is closed when the client has ended: closed, or its connection
// lost for good; Err then says why.
func (c *Client) Done() <-chan struct{} { return c.done }

// Err is why the client ended (ErrClosed, or an error wrapping
// ErrConnectionLost or the last dial's), nil while it runs.
func (c *Client) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Close ends the session with a normal closure, waits for the server's
// close frame and for the client's goroutine. Waiting requests end with
// ErrClosed.
func (c *Client) Close() error {
	c.stop(func(ws *websocket.Conn) { _ = ws.Close(websocket.StatusNormalClosure, "client closed") })
	return nil
}

// CloseNow drops the connection at once, as a client that goes away,
// without reconnecting, and waits for the client's goroutine.
func (c *Client) CloseNow() {
	c.stop(func(ws *websocket.Conn) { _ = ws.CloseNow() })
}

func (c *Client) stop(closeWS func(*websocket.Conn)) {
	c.mu.Lock()
	already := c.closing
	c.closing = true
	ws := c.ws
	c.mu.Unlock()
	if !already && ws != nil {
		closeWS(ws)
	}
	c.cancel()
	<-c.done
}

// Update sends a session.update.
func (c *Client) Update(ctx context.Context, u SessionUpdate) error {
	u.Type = protocol.TypeSessionUpdate
	b, err := json.Marshal(u)
	if err != nil {
		return fmt.Errorf("client: session.update: %w", err)
	}
	l, _, err := c.current()
	if err != nil {
		return err
	}
	return c.write(ctx, l, websocket.MessageText, b)
}

// StreamFrame sends frame seq (from 0, +1 per frame) of a server-turn
// session's audio stream (session.update turnDetection mode server): a
// binary frame whose header carries only seq, then payload in the
// session's encoding (16-bit little-endian PCM, or μ-law bytes). The
// server names the turns it finds (input.speech_started), and their
// messages reach OnUnrouted until a request is opened under that id.
func (c *Client) StreamFrame(ctx context.Context, seq int64, payload []byte) error {
	l, _, err := c.current()
	if err != nil {
		return err
	}
	return c.write(ctx, l, websocket.MessageBinary, protocol.EncodeStreamAudio(nil, seq, 0, payload))
}

// Open registers a request under id (1 to 64 characters of
// [A-Za-z0-9._:-]); handler, which may be nil, gets each of its
// messages, terminal message included, on the client's goroutine. An id
// may be opened again while an earlier request with it waits (the
// protocol's replacement): messages go to the oldest one still waiting.
func (c *Client) Open(id string, handler func(Event)) (*Request, error) {
	if !protocol.ValidRequestID(id) {
		return nil, fmt.Errorf("client: invalid requestId %q: want 1 to 64 characters of [A-Za-z0-9._:-]", id)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.err != nil:
		return nil, c.err
	case c.ws == nil:
		return nil, ErrNotConnected
	case c.waiting >= c.cfg.MaxWaiting:
		return nil, ErrTooManyRequests
	}
	r := &Request{c: c, id: id, gen: c.gen, handler: handler, done: make(chan struct{})}
	c.byID[id] = append(c.byID[id], r)
	c.waiting++
	return r, nil
}

// current returns the current connection and its number.
func (c *Client) current() (link, uint64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.err != nil:
		return link{}, 0, c.err
	case c.ws == nil:
		return link{}, 0, ErrNotConnected
	}
	return link{c.ws, c.stall}, c.gen, nil
}

// link is one connection with the guard of its writes.
type link struct {
	ws    *websocket.Conn
	stall *stallGuard
}

// write sends one message; a failed write drops the connection, so that
// the client's goroutine notices and reconnects.
//
// ctx is checked before the write, not during it: coder/websocket closes
// the connection when a write's context ends, which would end every other
// request on it too. A write is bounded by the connection's stallGuard
// (Config.WriteTimeout) instead.
func (c *Client) write(ctx context.Context, l link, typ websocket.MessageType, b []byte) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("client: write: %w", err)
	}
	l.stall.begin()
	err := l.ws.Write(context.Background(), typ, b)
	l.stall.end()
	if err != nil {
		_ = l.ws.CloseNow()
		return fmt.Errorf("client: write: %w", err)
	}
	return nil
}

// loop owns the connection: it reads until the connection ends, then
// reconnects or ends the client.
func (c *Client) loop(ws *websocket.Conn) {
	defer close(c.done)
	defer c.cancel()
	for {
		err := c.readWatched(ws)
		c.mu.Lock()
		closing := c.closing
		c.ws = nil
		c.stall.stop()
		c.stall = nil
		// No session can bring an orphan's terminal while there is no
		// connection: its wait goes on with the next resumed session,
		// up to the moment fixed at its first resume (orphan).
		for _, t := range c.orphans {
			t.Stop()
		}
		// The pongs of the pings sent on it will not come: closed by
		// the caller (ErrClosed, as the waiting requests) or lost.
		lost := ErrConnectionLost
		if closing {
			lost = ErrClosed
		}
		for t, ws := range c.syncs {
			for _, w := range ws {
				w <- lost
			}
			delete(c.syncs, t)
		}
		c.mu.Unlock()
		if closing {
			c.finish(ErrClosed)
			return
		}
		if c.cfg.OnDisconnect != nil {
			c.cfg.OnDisconnect(err)
		}
		if c.cfg.Reconnect.Disabled {
			c.finish(fmt.Errorf("%w: %w", ErrConnectionLost, err))
			return
		}
		if ws, err = c.reconnect(); err != nil {
			c.finish(err)
			return
		}
	}
}

// readWatched is read, with keepAlive watching ws meanwhile.
func (c *Client) readWatched(ws *websocket.Conn) error {
	if c.cfg.KeepAlive < 0 {
		return c.read(ws)
	}
	ctx, stop := context.WithCancel(c.ctx)
	var watch sync.WaitGroup
	var dropped atomic.Bool
	watch.Go(func() { dropped.Store(c.keepAlive(ctx, ws)) })
	err := c.read(ws)
	stop()
	watch.Wait()
	if dropped.Load() {
		return fmt.Errorf("%w: %w", ErrNoPong, err)
	}
	return err
}

// keepAlive pings ws once it has been quiet for KeepAlive, and drops it
// when the pong has not come KeepAlive later; the reader then sees the
// end. It reports whether it dropped ws, and ends with ctx.
func (c *Client) keepAlive(ctx context.Context, ws *websocket.Conn) bool {
	every := c.cfg.KeepAlive
	c.lastRead.Store(time.Now().UnixNano())
	t := time.NewTicker(every / 2)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
		if time.Since(time.Unix(0, c.lastRead.Load())) < every {
			continue
		}
		pctx, cancel := context.WithTimeout(ctx, every)
		err := c.Sync(pctx)
		cancel()
		if err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			_ = ws.CloseNow()
			return true
		}
	}
}

// read hands every message of ws to dispatch until the connection ends.
func (c *Client) read(ws *websocket.Conn) error {
	for {
		typ, b, err := ws.Read(c.ctx)
		if err != nil {
			return err
		}
		c.lastRead.Store(time.Now().UnixNano())
		ev := decodeEvent(typ == websocket.MessageBinary, b, time.Now())
		if ev.Type == protocol.TypePong {
			c.ponged(ev)
			continue
		}
		c.dispatch(ev, false)
	}
}

// Sync is a barrier: it sends a ping and returns once the pong is read,
// by which time every message the server sent before it has been read
// and handed to its request. A client starved of CPU can read a message
// long after the server wrote it; a load tester calls Sync before it
// counts a terminal message as missing. A ping lost with its connection
// is not re-sent: Sync then returns an error wrapping ErrConnectionLost
// (ErrClosed when Close or CloseNow ended the connection).
func (c *Client) Sync(ctx context.Context) error {
	l, _, err := c.current()
	if err != nil {
		return err
	}
	ch := make(chan error, 1)
	c.mu.Lock()
	t := max(protocol.Millis(time.Now()), c.lastSync+1)
	c.lastSync = t
	if c.syncs == nil {
		c.syncs = map[int64][]chan error{}
	}
	c.syncs[t] = append(c.syncs[t], ch)
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.syncs[t] = slices.DeleteFunc(c.syncs[t], func(w chan error) bool { return w == ch })
		if len(c.syncs[t]) == 0 {
			delete(c.syncs, t)
		}
	}()
	p, _ := json.Marshal(protocol.Ping{Type: protocol.TypePing, ClientTime: t})
	if err := c.write(ctx, l, websocket.MessageText, p); err != nil {
		return err
	}
	select {
	case err := <-ch:
		if err != nil {
			return fmt.Errorf("client: sync: %w", err)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("client: sync: %w", ctx.Err())
	case <-c.done:
		return c.Err()
	}
}

// ponged wakes the Syncs whose ping the pong ev answers, and those of
// earlier pings: the server answers pings in order, after everything it
// sent before.
func (c *Client) ponged(ev Event) {
	var pong protocol.Pong
	if ev.Decode(&pong) != nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for t, ws := range c.syncs {
		if t <= pong.ClientTime {
			for _, w := range ws {
				w <- nil
			}
			delete(c.syncs, t)
		}
	}
}

// dispatch hands ev to the oldest request waiting under its requestId,
// or to OnUnrouted. replay marks the messages read during a resumed
// session's handshake: the terminal messages the client missed.
func (c *Client) dispatch(ev Event, replay bool) {
	if ev.Type == TypeSessionDraining {
		c.draining.Store(true)
	}
	if ev.Type == TypeResult && !replay {
		c.takeToken(ev)
	}
	var r *Request
	if ev.RequestID != "" {
		c.mu.Lock()
		if q := c.byID[ev.RequestID]; len(q) > 0 {
			r = q[0]
			if ev.Terminal() {
				c.unlink(ev.RequestID, 0)
			}
			// A server turn's deadline is the server's: its end of speech
			// plus its budget, at most maxBudgetMs. The client sent no
			// deadlineAt for it; orphan needs one.
			if ev.Type == protocol.TypeSpeechStopped && r.deadlineAt.Load() == 0 {
				r.deadlineAt.Store(protocol.Millis(ev.At.Add(c.offset)) + c.ready.MaxBudgetMs)
			}
		}
		c.mu.Unlock()
	}
	ev.Replayed = replay && ev.Terminal()
	if r == nil {
		// Includes a replayed terminal message the client already had:
		// each terminal reaches its request once.
		if c.cfg.OnUnrouted != nil {
			c.cfg.OnUnrouted(ev)
		}
		return
	}
	if r.handler != nil {
		r.handler(ev)
	}
	if ev.Terminal() {
		r.end(ev, nil)
	}
}

// takeToken keeps a result's fresh resume token: the session's first
// expires -resume-ttl after session.ready however long the session goes
// on. A replayed result's is older than its session.ready's.
func (c *Client) takeToken(ev Event) {
	if ev.resumeToken == "" {
		return
	}
	c.mu.Lock()
	c.ready.ResumeToken = ev.resumeToken
	c.mu.Unlock()
}

// unlink removes the i-th waiting request of id: whoever removes a
// request ends it (Request.end), once. Call with mu held.
func (c *Client) unlink(id string, i int) {
	q := c.byID[id]
	if t := c.orphans[q[i]]; t != nil {
		t.Stop()
		delete(c.orphans, q[i])
	}
	q = append(q[:i:i], q[i+1:]...)
	if len(q) == 0 {
		delete(c.byID, id)
	} else {
		c.byID[id] = q
	}
	c.waiting--
}

// finish ends the client: every waiting request ends with err.
func (c *Client) finish(err error) {
	c.mu.Lock()
	c.err = err
	var ended []*Request
	for _, q := range c.byID {
		ended = append(ended, q...)
	}
	c.byID = map[string][]*Request{}
	c.waiting = 0
	for r, t := range c.orphans {
		t.Stop()
		delete(c.orphans, r)
	}
	c.mu.Unlock()
	for _, r := range ended {
		r.end(Event{}, err)
	}
}

// endOlder ends the requests sent on connections before gen: their
// terminal messages will not come.
func (c *Client) endOlder(gen uint64, err error) {
	var ended []*Request
	c.mu.Lock()
	for id, q := range c.byID {
		for i := len(q) - 1; i >= 0; i-- {
			if q[i].gen < gen {
				ended = append(ended, q[i])
				c.unlink(id, i)
				q = c.byID[id]
			}
		}
	}
	c.mu.Unlock()
	for _, r := range ended {
		r.end(Event{}, err)
	}
}

// orphan gives each request of a connection before gen, which the
// resumed session gen did not end with a replayed terminal, until its
// deadline (or its first resume's replay, if later) plus
// Reconnect.TerminalGrace; then it ends with ErrConnectionLost. That
// moment is fixed when the request is first orphaned: a request orphaned
// again (another resume) waits for what is left of it, so that a
// connection flapping faster than the grace cannot hold it for ever.
func (c *Client) orphan(gen uint64) {
	at := time.Now()
	now := c.ServerTime(at)
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, q := range c.byID {
		for _, r := range q {
			if r.gen >= gen {
				continue
			}
			if r.giveUpAt.IsZero() {
				r.giveUpAt = at.Add(time.Duration(max(r.deadlineAt.Load()-now, 0))*time.Millisecond + c.cfg.Reconnect.TerminalGrace)
			}
			wait := max(time.Until(r.giveUpAt), 0)
			if t := c.orphans[r]; t != nil {
				t.Reset(wait)
				continue
			}
			if c.orphans == nil {
				c.orphans = map[*Request]*time.Timer{}
			}
			c.orphans[r] = time.AfterFunc(wait, func() { c.giveUp(r) })
		}
	}
}

// giveUp ends r with ErrConnectionLost unless it has ended already.
func (c *Client) giveUp(r *Request) {
	c.mu.Lock()
	delete(c.orphans, r)
	i := slices.Index(c.byID[r.id], r)
	if i >= 0 {
		c.unlink(r.id, i)
	}
	c.mu.Unlock()
	if i >= 0 {
		r.end(Event{}, ErrConnectionLost)
	}
}

// continuesLocked reports whether the session ready announces goes on
// with the conversation of the last one: resumed, or, for a resume, the
// same conversation without its history ("resumed": false for a store
// the server could not read), which replays what its instance holds and
// hands over the terminals of requests still running there. c.mu must be
// held.
func (c *Client) continuesLocked(ready SessionReady, resuming bool) bool {
	return ready.Resumed || resuming && ready.ConversationID != "" && ready.ConversationID == c.ready.ConversationID
}

// reconnect dials again with backoff, resuming when it has a token.
func (c *Client) reconnect() (*websocket.Conn, error) {
	p := c.cfg.Reconnect
	c.mu.Lock()
	token := c.ready.ResumeToken
	c.mu.Unlock()
	var (
		last       error
		retryAfter time.Duration
	)
	timer := time.NewTimer(0)
	defer timer.Stop()
	<-timer.C
	now := false // the next attempt without a wait
	for attempt := 0; attempt < p.Attempts; attempt++ {
		wait := max(backoff(p, attempt), retryAfter)
		if now {
			wait, now = 0, false
		}
		timer.Reset(wait)
		select {
		case <-c.ctx.Done():
			return nil, ErrClosed
		case <-timer.C:
		}
		dctx, cancel := context.WithTimeout(c.ctx, c.cfg.DialTimeout)
		ws, err := c.connect(dctx, token)
		cancel()
		if err == nil {
			return ws, nil
		}
		if c.ctx.Err() != nil {
			return nil, ErrClosed
		}
		last, retryAfter = err, 0
		var he *HTTPError
		if errors.As(err, &he) {
			switch {
			case he.Status == http.StatusUnauthorized && token != "":
				// The resume token is refused (forged, expired, foreign):
				// start a new session instead, at once.
				c.cfg.Logger.Warn("voiced refused the resume token; starting a new session", "status", he.Status, "reason", he.Body)
				token = ""
				attempt--
				now = true
				continue
			case he.Status == http.StatusServiceUnavailable || he.Status == http.StatusTooManyRequests || he.Status >= 500:
				retryAfter = min(he.RetryAfter, p.Max)
			default: // 400, 401, 403, 404: retrying will not help
				return nil, fmt.Errorf("%w: %w", ErrConnectionLost, err)
			}
		}
		c.cfg.Logger.Debug("voiced reconnect attempt failed", "attempt", attempt+1, "err", err.Error())
	}
	return nil, fmt.Errorf("%w: gave up after %d attempts: %w", ErrConnectionLost, p.Attempts, last)
}

// backoff is the wait before reconnect attempt n: equal jitter on
// min(Initial x 2^n, Max).
func backoff(p Reconnect, n int) time.Duration {
	d := p.Max
	if n < 63 && p.Initial <= p.Max>>n { // no overflow
		d = p.Initial << n
	}
	return d/2 + rand.N(d/2+1)
}

// connect dials, reads session.ready, aligns the clock and makes the
// connection current. With a token it asks to resume.
func (c *Client) connect(ctx context.Context, token string) (*websocket.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.DialTimeout)
	defer cancel()
	target := c.cfg.URL
	if token != "" {
		u, _ := url.Parse(target) // checked by Dial
		q := u.Query()
		q.Set("resume", token)
		u.RawQuery = q.Encode()
		target = u.String()
	}
	h := c.cfg.Header.Clone()
	if c.cfg.Token != "" {
		if h == nil {
			h = http.Header{}
		}
		h.Set("Authorization", "Bearer "+c.cfg.Token)
	}
	ws, resp, err := websocket.Dial(ctx, target, &websocket.DialOptions{HTTPClient: c.cfg.HTTPClient, HTTPHeader: h, Subprotocols: []string{Subprotocol}})
	if err != nil {
		if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols {
			return nil, httpError(resp)
		}
		if token != "" {
			err = redactToken(err, token)
		}
		return nil, fmt.Errorf("client: dial: %w", err)
	}
	if ws.Subprotocol() != Subprotocol {
		_ = ws.CloseNow()
		return nil, fmt.Errorf("client: dial: the server did not agree to subprotocol %s", Subprotocol)
	}
	ws.SetReadLimit(c.cfg.ReadLimit)
	// Before the handshake: a session.draining read during it is this
	// connection's.
	c.draining.Store(false)
	ready, offset, rtt, err := c.handshake(ctx, ws, token != "")
	if err != nil {
		_ = ws.CloseNow()
		return nil, err
	}
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		_ = ws.CloseNow()
		return nil, ErrClosed
	}
	// A resume the server accepted without its history ("resumed": false
	// for a store it could not read) keeps the conversation: the
	// terminals this instance holds are replayed, and those of requests
	// still running here are handed over as each is decided. Only a new
	// conversation ends the lost connection's requests at once.
	same := c.continuesLocked(ready, token != "")
	c.ws, c.ready, c.offset, c.rtt = ws, ready, offset, rtt
	c.stall = newStallGuard(c.cfg.WriteTimeout, func() { _ = ws.CloseNow() })
	c.gen++
	gen := c.gen
	c.mu.Unlock()
	if same {
		c.orphan(gen)
	} else {
		c.endOlder(gen, ErrConnectionLost)
	}
	if gen > 1 {
		c.cfg.Logger.Info("voiced reconnected", "session", ready.SessionID, "resumed", ready.Resumed, "instance", ready.Instance)
	}
	if c.cfg.OnConnect != nil {
		c.cfg.OnConnect(ready)
	}
	return ws, nil
}

// redacted is an error whose message had a secret taken out. It unwraps
// to the cause under the *url.Error that quoted the secret, so that
// errors.Is still finds a timeout or a refused connection.
type redacted struct {
	msg   string
	cause error
}

func (e *redacted) Error() string { return e.msg }
func (e *redacted) Unwrap() error { return e.cause }

// redactToken takes the resume token out of a failed dial's error:
// net/http's errors quote the URL, whose query carries it, and the error
// is logged and returned.
func redactToken(err error, token string) error {
	msg := err.Error()
	esc := url.QueryEscape(token)
	if !strings.Contains(msg, esc) && !strings.Contains(msg, token) {
		return err
	}
	var cause error
	if ue, ok := errors.AsType[*url.Error](err); ok {
		cause = ue.Err
	}
	msg = strings.ReplaceAll(strings.ReplaceAll(msg, esc, "REDACTED"), token, "REDACTED")
	return &redacted{msg: msg, cause: cause}
}

// httpError reads a refused upgrade.
func httpError(resp *http.Response) *HTTPError {
	e := &HTTPError{Status: resp.StatusCode}
	if resp.Body != nil {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		e.Body = strings.TrimSpace(string(b))
	}
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 {
		e.RetryAfter = time.Duration(s) * time.Second
	}
	return e
}

// handshake reads session.ready, then aligns the clock: of Pings pings,
// the one with the shortest round trip gives the offset, at its
// midpoint. Messages other than pongs read meanwhile are dispatched; on
// a resumed session they are the replayed terminal messages.
func (c *Client) handshake(ctx context.Context, ws *websocket.Conn, resuming bool) (ready SessionReady, offset, rtt time.Duration, err error) {
	_, b, err := ws.Read(ctx)
	if err != nil {
		return ready, 0, 0, fmt.Errorf("client: read session.ready: %w", err)
	}
	at := time.Now()
	m, err := protocol.DecodeServer(b)
	switch {
	case err != nil:
		return ready, 0, 0, fmt.Errorf("client: session.ready: %w", err)
	case m.Type == TypeError:
		var e ErrorMessage
		_ = m.As(&e)
		return ready, 0, 0, fmt.Errorf("client: server error instead of session.ready: %s: %s", e.Code, e.Message)
	case m.Type != TypeSessionReady:
		return ready, 0, 0, fmt.Errorf("client: got %q, want session.ready", m.Type)
	}
	if err := m.As(&ready); err != nil {
		return ready, 0, 0, fmt.Errorf("client: decode session.ready: %w", err)
	}
	ready.At = at
	if ready.Protocol != Subprotocol {
		return ready, 0, 0, fmt.Errorf("client: server speaks %q, want %q", ready.Protocol, Subprotocol)
	}
	c.mu.Lock()
	replay := c.continuesLocked(ready, resuming)
	c.mu.Unlock()
	pings := c.cfg.Pings
	if pings < 0 && replay {
		// No clock alignment, but one pong still marks where the replay
		// ends: read before orphan arms the wait of the requests it did
		// not end, which may have run out during the outage, and so
		// before a give-up that would send their terminals to OnUnrouted.
		pings = 1
	}
	rtt = -1
	for range pings {
		t0 := time.Now()
		p, _ := json.Marshal(protocol.Ping{Type: protocol.TypePing, ClientTime: protocol.Millis(t0)})
		if err := ws.Write(ctx, websocket.MessageText, p); err != nil {
			return ready, 0, 0, fmt.Errorf("client: ping: %w", err)
		}
		var pong protocol.Pong
		for {
			typ, b, err := ws.Read(ctx)
			if err != nil {
				return ready, 0, 0, fmt.Errorf("client: read pong: %w", err)
			}
			ev := decodeEvent(typ == websocket.MessageBinary, b, time.Now())
			if ev.Type == protocol.TypePong && ev.Decode(&pong) == nil && pong.ClientTime == protocol.Millis(t0) {
				break
			}
			if ev.Type != protocol.TypePong {
				c.dispatch(ev, replay)
			}
		}
		t1 := time.Now()
		if d := t1.Sub(t0); rtt < 0 || d < rtt {
			rtt = d
			// serverTime is whole milliseconds, truncated: its true value
			// is half a millisecond later on average.
			offset = protocol.Time(pong.ServerTime).Add(500 * time.Microsecond).Sub(t0.Add(d / 2))
		}
	}
	if c.cfg.Pings < 0 {
		return ready, 0, 0, nil
	}
	return ready, offset, max(rtt, 0), nil
}

// Frame is one frame of a request's audio.
type Frame struct {
	// PCM is 16-bit mono samples; empty is allowed (a final frame that
	// only marks the end).
	PCM []int16
	// Final marks the last frame of the utterance.
	Final bool
	// DeadlineAt is the request's deadline on the server's clock
	// (Client.DeadlineIn); 0 means now plus the session's maxBudgetMs.
	// The newest frame's governs: for audio sent as it is spoken, set it
	// on each frame as it is sent, or a long utterance outlives it.
	DeadlineAt int64
	// SampleRate is the PCM's rate when it is not the session's; 0 is
	// the session's.
	SampleRate int
	// MuLaw sends the samples as G.711 μ-law bytes, for a session whose
	// inbound encoding is mulaw (session.update encoding, 8000 Hz).
	MuLaw bool
}

// Request is one request of the session.
type Request struct {
	c       *Client
	id      string
	gen     uint64
	handler func(Event)
	done    chan struct{}

	// Send's state: Send is called by one goroutine at a time.
	seq int64
	buf []byte
	// deadlineAt is the latest frame's, for orphan.
	deadlineAt atomic.Int64
	// giveUpAt is when orphan gives the request up, fixed when it is
	// first orphaned; guarded by c.mu.
	giveUpAt time.Time

	// Set before done is closed.
	term Event
	err  error
}

// ID is the request's requestId.
func (r *Request) ID() string { return r.id }

// Send sends the next frame of the request's audio as a binary message.
// Frames are numbered from 0. It is not safe to call Send concurrently on
// one request.
func (r *Request) Send(ctx context.Context, f Frame) error {
	select {
	case <-r.done:
		return ErrRequestEnded
	default:
	}
	l, err := r.conn()
	if err != nil {
		return err
	}
	r.c.mu.Lock()
	budget := time.Duration(r.c.ready.MaxBudgetMs) * time.Millisecond
	r.c.mu.Unlock()
	capAt := r.c.DeadlineIn(budget)
	if f.DeadlineAt == 0 {
		f.DeadlineAt = capAt
	}
	// The server's deadline is min(deadlineAt, the final frame's arrival
	// + maxBudgetMs): an orphan waits for that, not for a later deadlineAt
	// the server never honours (TerminalGrace covers the trip).
	if budget > 0 {
		r.deadlineAt.Store(min(f.DeadlineAt, capAt))
	} else {
		r.deadlineAt.Store(f.DeadlineAt)
	}
	h := protocol.AudioHeader{RequestID: r.id, DeadlineAt: f.DeadlineAt, Seq: r.seq, Final: f.Final, SampleRate: f.SampleRate}
	pcm := f.PCM
	if f.MuLaw {
		pcm = nil
	}
	if r.buf, err = protocol.EncodeBinaryAudio(r.buf[:0], h, pcm); err != nil {
		return fmt.Errorf("client: encode frame: %w", err)
	}
	if f.MuLaw {
		r.buf = mulaw.AppendEncode(r.buf, f.PCM)
	}
	if err := r.c.write(ctx, l, websocket.MessageBinary, r.buf); err != nil {
		return err
	}
	r.seq++
	return nil
}

// Cancel asks the server to cancel the request; it then ends with an
// error "cancelled". A request that already ended is left alone.
func (r *Request) Cancel(ctx context.Context) error {
	return r.control(ctx, protocol.Cancel{Type: protocol.TypeCancel, RequestID: r.id}, true)
}

// Playback tells the server the client stopped playing the request's
// answer.audio after playedMs milliseconds (a barge-in).
func (r *Request) Playback(ctx context.Context, playedMs int64) error {
	return r.control(ctx, protocol.Playback{Type: protocol.TypePlayback, RequestID: r.id, PlayedMs: playedMs}, false)
}

func (r *Request) control(ctx context.Context, msg any, onlyWaiting bool) error {
	if onlyWaiting {
		select {
		case <-r.done:
			return nil
		default:
		}
	}
	l, err := r.conn()
	if err != nil {
		return err
	}
	b, _ := json.Marshal(msg)
	return r.c.write(ctx, l, websocket.MessageText, b)
}

// conn is the connection the request was opened on, while it is the
// current one: a request's messages never go to another connection.
func (r *Request) conn() (link, error) {
	l, gen, err := r.c.current()
	if err != nil {
		return link{}, err
	}
	if gen != r.gen {
		return link{}, ErrConnectionLost
	}
	return l, nil
}

// Done is closed when the request has ended: with its terminal message,
// or because its connection or the client ended.
func (r *Request) Done() <-chan struct{} { return r.done }

// Wait waits for the request's end and returns its terminal message, or
// the error that ended it without one (ErrConnectionLost, ErrClosed), or
// ctx's error.
func (r *Request) Wait(ctx context.Context) (Event, error) {
	select {
	case <-r.done:
		return r.term, r.err
	case <-ctx.Done():
		return Event{}, context.Cause(ctx)
	}
}

// end records how the request ended; whoever took it out of the
// client's requests (Client.unlink, finish) calls it, once.
func (r *Request) end(term Event, err error) {
	r.term, r.err = term, err
	close(r.done)
}
