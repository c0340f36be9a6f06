package loadgen

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/voiced/voiced/client"
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
	deadlineAt int64           // server ms, of the final frame
	deadline   time.Time       // local clock equivalent of deadlineAt
	cancelSent time.Time       // when a cancel message was sent
	term       *terminal       // the first terminal message
	extraTypes []string        // types of messages after the terminal
	extraTerm  int             // terminal messages after the first
	excusable  bool            // extras may answer frames or a cancel in flight
	events     int             // non-terminal messages before the terminal
	firstSent  time.Time       // the first frame's send
	finalText  time.Time       // arrival of the final transcript
	firstDelta time.Time       // arrival of the first answer.delta
	firstAudio time.Time       // arrival of the first answer.audio
	audioBytes int             // PCM bytes of answer.audio
	audioSeq   int64           // the next answer.audio seq expected
	audioFinal bool            // the final answer.audio came
	audioBad   bool            // answer.audio out of order, after its final, or no final before a result
	gone       goneReason      // why a missing terminal is expected
	dropped    goneReason      // -resume: its connection dropped before its terminal (goneKilled or goneServerClosed)
	replayed   bool            // -resume: its terminal came on the resumed session
	kept       bool            // -resume: and the server kept it while no connection was there: not late, no latency
	waitedOut  bool            // waited out deadline + grace + sync on a live connection: missing, whatever happens to the connection later
	offset     time.Duration   // the conn's clock offset, for the report
	req        *client.Request // set under mu when opened (nil on a connection already gone); then used, and dropped once the turn is over, by the goroutine that sends and waits
	// A server turn's span in its stream, from input.speech_started and
	// input.speech_stopped (ms; -1 unknown).
	audioStartMs, audioEndMs int64
}

type goneReason string

const (
	goneNone         goneReason = ""
	goneDisconnect   goneReason = "client_disconnect" // we dropped the connection
	goneServerClosed goneReason = "server_closed"     // the server closed it
	goneKilled       goneReason = "instance_killed"   // it ended without a close frame: the instance died
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

// conn is one session, spoken through the reference client: its
// handlers match server messages to attempts; any goroutine may send.
type conn struct {
	r      *runner
	cl     *client.Client
	ready  client.SessionReady
	offset time.Duration // server clock minus local clock
	rtt    time.Duration // round trip of the ping the offset came from
	budget time.Duration

	mu      sync.Mutex
	byID    map[string][]*attempt // guarded by mu
	turns   []*attempt            // server turns detected, in order; guarded by mu
	closing bool                  // guarded by mu; we are dropping the connection
	ending  bool                  // guarded by mu; the run is over and closes it

	// -resume: the client reconnects; see resume.go.
	up      bool          // guarded by mu; a connection is open
	dropAt  time.Time     // guarded by mu; when the last connection dropped
	dropWhy goneReason    // guarded by mu; and how
	upAt    time.Time     // guarded by mu; the current connection's session.ready, as read
	wake    chan struct{} // a connection opened (capacity 1)
}

// dial opens a session with the client package (which reads
// session.ready and aligns the clocks) and, with -speech, turns speech
// on. voiceload re-dials sessions itself, so the client does not
// reconnect.
func (r *runner) dial(ctx context.Context) (*conn, error) {
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	c := &conn{r: r, byID: make(map[string][]*attempt), wake: make(chan struct{}, 1)}
	// MaxWaiting: the run bounds its own requests; the client's bound
	// (256) refused an open rate past it as if the server had closed.
	// KeepAlive off: -idle sessions send nothing, and the run's own
	// grace finds a terminal that does not come; a ticker per session
	// would also cost the client CPU it shares with the server.
	ccfg := client.Config{URL: r.url, Token: r.cfg.Token, DialTimeout: 10 * time.Second, MaxWaiting: 1 << 20, KeepAlive: -1,
		Reconnect: client.Reconnect{Disabled: true}, OnUnrouted: c.unrouted, OnDisconnect: func(error) { c.lost() }}
	if r.cfg.Resume {
		ccfg.Reconnect = resumePolicy
		ccfg.OnDisconnect, ccfg.OnConnect = c.dropped, c.connected
	}
	cl, err := client.Dial(dctx, ccfg)
	if err != nil {
		if he, ok := errors.AsType[*client.HTTPError](err); ok {
			if he.Status == http.StatusUnauthorized {
				return nil, fmt.Errorf("dial: HTTP 401: the server wants a bearer token; set VOICELOAD_TOKEN")
			}
			return nil, fmt.Errorf("dial: HTTP %d", he.Status)
		}
		return nil, err
	}
	c.mu.Lock() // connected, on the client's goroutine, reads them
	c.cl, c.ready = cl, cl.Ready()
	c.offset, c.rtt = cl.Offset()
	c.mu.Unlock()
	c.budget = time.Duration(c.ready.MaxBudgetMs) * time.Millisecond
	if r.cfg.Budget > 0 && (c.budget <= 0 || r.cfg.Budget < c.budget) {
		c.budget = r.cfg.Budget
	}
	if r.cfg.Speech {
		if err := c.askSpeech(dctx); err != nil {
			cl.CloseNow()
			return nil, err
		}
	}
	if err := c.setUp(dctx); err != nil {
		cl.CloseNow()
		return nil, err
	}
	return c, nil
}

// askSpeech turns speech on for the session: binary, 16 kHz, the
// default voice.
func (c *conn) askSpeech(ctx context.Context) error {
	if c.ready.Speech == nil {
		return errors.New("-speech: the server offers no speech (no speech in session.ready)")
	}
	if err := c.cl.Update(ctx, client.SessionUpdate{Speech: json.RawMessage(`{"sampleRate":16000,"encoding":"binary"}`)}); err != nil {
		return fmt.Errorf("session.update speech: %w", err)
	}
	return nil
}

// dead is closed when the connection has ended.
func (c *conn) dead() <-chan struct{} { return c.cl.Done() }

// unrouted handles what the client routes to no request: session-level
// messages, and messages of a request that has no attempt waiting (after
// its terminal message, or never opened).
func (c *conn) unrouted(ev client.Event) {
	switch {
	case ev.Type == client.TypeUndecodable:
		if len(ev.Raw) > 0 && ev.Raw[0] != '{' {
			c.r.sessionError("undecodable_audio")
		} else {
			c.r.sessionError("undecodable_message")
		}
	case ev.Type == client.TypeSessionDraining:
		// The server is shutting down: the client marks the session
		// draining, and no new request starts here.
	case ev.Type == protocol.TypeSpeechStarted && c.r.cfg.Turns == TurnsServer:
		c.turnStarted(ev)
	case c.r.cfg.Turns == TurnsServer && ev.Terminal() && isTurnID(ev.RequestID) && !c.known(ev.RequestID):
		c.turnRefused(ev)
	case ev.RequestID == "":
		if e, ok := ev.Error(); ok {
			c.r.sessionError(string(e.Code))
		} else {
			c.r.sessionError("unexpected_" + ev.Type)
		}
	default:
		c.extra(ev)
	}
}

// known reports whether the client has had an attempt under id.
func (c *conn) known(id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.byID[id]) > 0
}

// extra records a message for a request whose attempts all have their
// terminal message: it belongs to the last of them.
func (c *conn) extra(ev client.Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	as := c.byID[ev.RequestID]
	if len(as) == 0 {
		c.r.sessionError("unknown_request_id")
		return
	}
	last := as[len(as)-1]
	last.extraTypes = append(last.extraTypes, describe(ev))
	if ev.Terminal() {
		last.extraTerm++
		c.r.extraTerminals.Add(1)
	}
}

// onEvent records one of a's messages; the client hands a its messages
// in order, the terminal message last.
func (c *conn) onEvent(a *attempt, ev client.Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	at := ev.At
	if !ev.Terminal() {
		a.events++
		switch ev.Type {
		case protocol.TypeSpeechStopped:
			c.turnStopped(a, ev)
		case client.TypeTranscript:
			var tr client.Transcript
			if a.finalText.IsZero() && ev.Decode(&tr) == nil && tr.Final {
				a.finalText = at
			}
		case client.TypeAnswerDelta:
			if a.firstDelta.IsZero() {
				a.firstDelta = at
			}
		case client.TypeAnswerAudio:
			au := ev.Audio
			if au == nil || au.Seq != a.audioSeq || a.audioFinal {
				a.audioBad = true
			}
			if au != nil {
				if a.firstAudio.IsZero() {
					a.firstAudio = at
				}
				a.audioSeq++
				a.audioBytes += 2 * len(au.PCM)
				a.audioFinal = au.Final
			}
		}
		return
	}
	if a.audioSeq > 0 && !a.audioFinal && ev.Type == client.TypeResult {
		a.audioBad = true // a result's audio ends with its final chunk
	}
	t := terminalOf(ev)
	a.term = t
	if (ev.Replayed || a.dropped != goneNone) && !a.waitedOut {
		a.replayed = true
		// Kept by the server while no connection was there (replayed, or
		// forwarded by a session of the same instance while the session
		// was not yet back by the deadline): not late for that, nor a
		// latency. One forwarded on a session back before the deadline
		// had a connection to come by then, and is judged as any other.
		// One already waited out was missing on a live connection: its
		// replay comes too late, and counts so.
		if d := a.deadlineOf(); ev.Replayed || !c.upAt.Before(d) {
			a.kept = true
			c.r.ended.Add(1)
			close(a.done)
			return
		}
	}
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

// terminalOf decodes a terminal message: a result, or an error and its
// code.
func terminalOf(ev client.Event) *terminal {
	t := &terminal{typ: ev.Type, at: ev.At}
	if ev.Type == client.TypeResult {
		var res client.Result
		if err := ev.Decode(&res); err != nil {
			t.code = "undecodable_result"
			return t
		}
		t.code, t.degraded, t.reasons, t.budgetDeadlineAt = "result", res.Degraded, res.Degradation, res.Budget.DeadlineAt
		return t
	}
	if e, ok := ev.Error(); ok {
		t.code, t.message = string(e.Code), e.Message
	} else {
		t.code = "undecodable_error"
	}
	return t
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
	now := time.Now()
	for _, as := range c.byID {
		for _, a := range as {
			if why == goneDisconnect && c.up && a.dropped != goneNone && !a.deadline.IsZero() && now.After(a.deadline.Add(c.r.cfg.Grace)) {
				// -resume: an earlier drop left it waiting, the session
				// was resumed, and it was due (with its grace) before we
				// dropped this connection: we did not cut it off. The
				// drop's accounting has it (lost with its instance, or
				// missing).
				continue
			}
			c.markGone(a, why)
		}
	}
}

// markGone marks a, still waiting, as gone with its connection. Call
// with mu held.
func (c *conn) markGone(a *attempt, why goneReason) {
	if a.term == nil && a.gone == goneNone && !a.waitedOut {
		a.gone = why
		c.r.gone.Add(1)
	}
}

// open registers a new attempt under id, with the client and here. An
// attempt opened on a connection that is already gone is gone with it
// and sends nothing. One the client refuses while it reconnects (-resume,
// between a drop and the resumed session) is no request at all: nothing
// of it reaches a server, so it is neither counted nor judged.
func (c *conn) open(id string, k kind) *attempt {
	a := &attempt{id: id, kind: k, opened: time.Now(), done: make(chan struct{})}
	c.mu.Lock()
	a.offset = c.offset
	// Under mu, so that lost, which the client calls after the connection
	// ends, sees every attempt the client accepted.
	req, err := c.cl.Open(id, func(ev client.Event) { c.onEvent(a, ev) })
	if errors.Is(err, client.ErrNotConnected) {
		c.mu.Unlock()
		return a
	}
	a.req = req
	c.byID[id] = append(c.byID[id], a)
	if err != nil && !c.ending {
		why := goneServerClosed
		if c.closing {
			why = goneDisconnect
		}
		c.markGone(a, why)
	}
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
	if a.req == nil {
		return errStopped // opened on a connection already gone
	}
	var timer *time.Timer
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
			case <-c.dead():
				return errStopped
			case <-timer.C:
			}
		}
		select {
		case <-a.done:
			return errStopped
		case <-c.dead():
			return errStopped
		default:
		}
		final := i == len(frames)-1
		f := client.Frame{PCM: pcm, Final: final, DeadlineAt: c.cl.DeadlineIn(c.budget), SampleRate: rate, MuLaw: c.r.cfg.MuLaw}
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
			a.deadlineAt = f.DeadlineAt
			a.deadline = c.cl.LocalTime(f.DeadlineAt)
		}
		c.mu.Unlock()
		// A failed write drops the connection, so the session is
		// re-dialled.
		if err := a.req.Send(ctx, f); err != nil {
			return err
		}
		c.r.frames.Add(1)
	}
	return nil
}

// cancel sends a cancel message for a, unless it already ended.
func (c *conn) cancel(ctx context.Context, a *attempt) error {
	c.mu.Lock()
	if a.term != nil || a.req == nil {
		c.mu.Unlock()
		return nil
	}
	a.cancelSent = time.Now()
	c.mu.Unlock()
	return a.req.Cancel(ctx)
}

// supersede sends a session.update switching supersede on or off.
func (c *conn) supersede(ctx context.Context, on bool) error {
	return c.cl.Update(ctx, client.SessionUpdate{Supersede: &on})
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
	c.sync(ctx, a)
}

// release drops a's client request once its turn is over: what the report
// needs is in a. The request holds its frame buffer, its terminal message
// as read and its client, and a run keeps every attempt: over tens of
// thousands of requests they were most of the load generator's heap, and
// its collector's pauses made terminals late at the client.
func (a *attempt) release() { a.req = nil }

// sync, when a is still waiting on a live connection, waits until the
// client has read everything the server sent so far (client.Sync, bounded
// by syncBound): a load generator starved of CPU reads terminals seconds
// after the server wrote them, and without it would count them missing
// rather than late.
func (c *conn) sync(ctx context.Context, a *attempt) {
	select {
	case <-a.done:
		return
	case <-c.dead():
		return
	default:
	}
	sctx, cancel := context.WithTimeout(ctx, syncBound)
	// The attempt can also end otherwise meanwhile (a resumed session
	// replays its terminal): then there is nothing left to wait for.
	var watch sync.WaitGroup
	defer watch.Wait()
	defer cancel()
	watch.Go(func() {
		select {
		case <-a.done:
			cancel()
		case <-sctx.Done():
		}
	})
	// The terminal itself ends the Sync early (its error then does not
	// matter).
	synced := c.cl.Sync(sctx) == nil
	select {
	case <-a.done:
		c.mu.Lock()
		late := !a.kept // a kept terminal is not counted late
		c.mu.Unlock()
		if late {
			c.r.caughtUp.Add(1)
		}
	default:
		// The server answered a ping sent after the deadline and the
		// grace, and the terminal did not come before it: missing, and a
		// later end of the connection (a disconnect turn, a kill) does
		// not excuse it (markGone, dropped).
		c.mu.Lock()
		if synced && a.term == nil && a.gone == goneNone && a.dropped == goneNone {
			a.waitedOut = true
		}
		c.mu.Unlock()
	}
}

// syncBound bounds sync: a server that has not answered a ping by then
// has not sent the terminal either.
const syncBound = 5 * time.Second

// pause waits d, or less if a ends, the connection ends or ctx is done.
func (c *conn) pause(ctx context.Context, a *attempt, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-a.done:
	case <-c.dead():
	case <-ctx.Done():
	case <-t.C:
	}
}

// drop closes the connection abruptly, as a client that goes away
// mid-request, and waits for the client's reader. Its waiting attempts
// are gone with it.
func (c *conn) drop() {
	c.mu.Lock()
	c.closing = true
	c.mu.Unlock()
	c.cl.CloseNow()
	c.lost()
}

// close ends the session normally (waiting for the server's close frame)
// and waits for the client's reader.
func (c *conn) close() {
	c.mu.Lock()
	if !c.up {
		// With -resume, the session was not resumed: the client gave up
		// reconnecting, or we give it up while it still tries
		// (resumeTimeout, the run's end). What its dropped connection
		// left waiting is lost with a session that was not resumed (as in
		// connected). Without -resume nothing is dropped.
		for _, as := range c.byID {
			for _, a := range as {
				if a.term == nil && a.dropped != goneNone {
					c.markGone(a, goneServerClosed)
				}
			}
		}
	}
	c.ending = true
	c.mu.Unlock()
	_ = c.cl.Close()
}

// alive reports whether the connection is still up and open to new
// requests (not draining).
func (c *conn) alive() bool {
	if c.cl.Draining() {
		return false
	}
	select {
	case <-c.dead():
		return false
	default:
		return true
	}
}

// describe names a message for the report: its type, and its code for
// an error.
func describe(ev client.Event) string {
	e, ok := ev.Error()
	if !ok {
		return ev.Type
	}
	return ev.Type + ":" + string(e.Code) + " (" + e.Message + ")"
}
