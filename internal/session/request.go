package session

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/voiced/voiced/internal/cancel"
	"github.com/voiced/voiced/internal/deadline"
	"github.com/voiced/voiced/internal/domain"
	"github.com/voiced/voiced/internal/pipeline"
	"github.com/voiced/voiced/internal/protocol"
	"github.com/voiced/voiced/internal/turnwords"
	"github.com/voiced/voiced/internal/vad"
)

// request is one accepted request of a session. It is the pipeline's Sink:
// the gate in finish makes sure exactly one terminal message is sent and
// nothing of the request follows it.
//
// Its deadline is decided once, when the final frame arrives, and travels
// only in the context handed to the pipeline then (finalc). Before that the
// request is streaming, and a timer ends it when the newest frame's
// deadlineAt is about to pass or its longest life is over.
type request struct {
	s      *Session
	id     string
	log    *slog.Logger // with the client's tenant: a request refused tells whose it was (its address: "request ended")
	audio  *pipeline.FrameQueue
	finalc chan context.Context // the deadline context, once the final frame arrives

	// Set before the request is visible in the registry, then read-only.
	handle  *cancel.Handle[*request]
	ctx     context.Context // the request's context, for observing its end
	expiry  *time.Timer     // streaming expiry, until the final frame; armed under mu
	opened  time.Time
	maxLife time.Time // no request streams past this, whatever its deadlineAt
	// turn is a server turn's stream (nil: a client's request), whose
	// read-only settings (stall, budget, rate) the streaming timer uses.
	turn *turnStream

	// Owned by the reader goroutine.
	nextSeq    int64
	final      bool
	sampleRate int
	muLaw      bool // the request's frames are μ-law (the session's encoding when it opened)
	samples    int64
	maxSamples int64

	// cancelRead is when the client's cancel of this request was read,
	// Unix nanoseconds (0: none), for voiced_cancel_to_terminal_seconds.
	cancelRead atomic.Int64

	// A server turn's newest frame: when its audio ends played in real
	// time from its arrival (turnStream.playedOut), Unix nanoseconds, and
	// the stream position where it ends. The reader stores them; the
	// streaming timer ends the turn when no audio comes (see stopTurn).
	heard    atomic.Int64
	heardPos atomic.Int64
	// streamPos: the stream position the reader has framed, for a stall's
	// input.speech_stopped (decidedMs).
	streamPos atomic.Int64
	// words: a server turn's newest partial transcript, whether it stops
	// unfinished and how far into the turn's audio it goes. The pipeline's
	// goroutine sets it (Heard), the reader's endpointer reads it
	// (turnStream.Unfinished) to hold the turn through a pause.
	words vad.Heard

	// The newest frame's deadlineAt in protocol milliseconds (which,
	// unlike Unix nanoseconds, cannot overflow for any deadlineAt a
	// client may send).
	latestMs atomic.Int64

	// The session's speech settings when the request opened; nil: off.
	speech *protocol.SpeechSettings
	// speechMuLaw: answer.audio goes out as μ-law (a μ-law session whose
	// speech is at 8000 Hz).
	speechMuLaw bool

	mu       sync.Mutex
	ended    bool      // guarded by mu
	audioSeq int64     // the next answer.audio's seq; guarded by mu
	finalAt  time.Time // the final frame's arrival; guarded by mu
	deadline time.Time // the request's deadline, from finalAt on; guarded by mu
	cut      bool      // a server turn ended at -max-audio; guarded by mu
	// stopped: a server turn's speech has stopped (stopTurn), and no
	// more of the stream's audio is its. Guarded by mu.
	stopped bool
	// Set with deadline: release the deadline context and its backstop.
	stopDeadline context.CancelFunc // guarded by mu
	stopBackstop func() bool        // guarded by mu
	// settling, once the request has ended, is closed when its terminal
	// message is queued, while settle runs without mu; guarded by mu.
	settling chan struct{}
	// stopSave cuts settle's save short (cutSave); guarded by mu.
	stopSave context.CancelFunc
	// saveCut: cutSave was asked before any save started; one that
	// starts later starts cut. Guarded by mu.
	saveCut bool
}

var (
	_ pipeline.Sink      = (*request)(nil)
	_ pipeline.HeardSink = (*request)(nil)
)

// Overload causes, the label of voiced_overloaded_total.
const (
	overloadInFlight    = "in_flight_limit"   // the session's -max-in-flight
	overloadAudioBuffer = "audio_buffer_full" // the server's -max-buffered-audio
	overloadRecognizer  = "no_recognizer"     // no speech recognizer free in time
	overloadUpstream    = "upstream"          // a remote stage answered that it is overloaded
	overloadSaturated   = "saturated"         // the process runs too late to take more work
)

var overloadCauses = []string{overloadInFlight, overloadAudioBuffer, overloadRecognizer, overloadUpstream, overloadSaturated}

// handleAudio routes one audio message: it opens, feeds, replaces or
// refuses a request. It runs in the reader goroutine.
func (s *Session) handleAudio(ctx context.Context, a *protocol.Audio, arrival time.Time) {
	if s.stream != nil {
		s.streamAudio(ctx, a, arrival)
		return
	}
	h := &a.Header
	if hd, ok := s.reqs.Get(h.RequestID); ok {
		req := hd.Value
		if !req.final {
			s.feed(req, a, arrival)
			return
		}
		if h.Seq != 0 {
			if req.hasEnded() {
				// Its terminal is decided (maybe waiting for its history
				// save): a stray frame is ignored, as once it is sent.
				return
			}
			s.endRequest(req, nil, protocol.Errorf(protocol.CodeBadMessage,
				"frame seq %d after the final frame of request %q", h.Seq, h.RequestID))
			return
		}
		s.resend(ctx, req, a, arrival)
		return
	} else if h.Seq != 0 {
		if s.tombstoned(h.RequestID) {
			// The rest of a request that already has its terminal
			// message (cancelled, refused, or ended on its deadline).
			return
		}
		// Not tied to any request this session knows: a session-level
		// error, so that it can never be a second terminal message for
		// an id that ended long ago. The id is remembered so that the
		// rest of its frames are not answered one by one.
		s.addTombstone(h.RequestID)
		s.badInput(protocol.Errorf(protocol.CodeBadMessage,
			"no request %q in flight: a request starts at seq 0, got seq %d", h.RequestID, h.Seq), "")
		return
	}
	s.open(ctx, a, arrival, false)
}

// resend replaces req, whose final frame has come, with the request its
// re-sent id opens. The new request takes the old one's place: it is not
// refused for a drain, the load or the in-flight limit, which would
// leave the client neither answer (the refusal a second terminal under
// the id, which clients drop). A drain's close waits meanwhile: the old
// request may be the last in flight, and its end would otherwise queue
// the close, refusing the new one after all.
func (s *Session) resend(ctx context.Context, req *request, a *protocol.Audio, arrival time.Time) {
	s.mu.Lock()
	s.resending = true
	s.mu.Unlock()
	// The old request's terminal must go out before the new request's
	// events (they share the id): one waiting for its history save cuts
	// the save short rather than hold the reader, and every message of
	// the session behind it, for up to the old request's budget.
	req.cutSave()
	s.endRequest(req, cancel.Replaced, nil)
	s.open(ctx, a, arrival, true)
	s.mu.Lock()
	s.resending = false
	s.mu.Unlock()
	s.closeIfDrained() // the new request may have been refused (its deadline had passed)
}

// open accepts a new request, or refuses it with its one terminal message.
// replaced: the request takes the place of one its id's re-send ended
// (resend).
func (s *Session) open(ctx context.Context, a *protocol.Audio, arrival time.Time, replaced bool) {
	h := &a.Header
	s.clearTombstone(h.RequestID)
	if !protocol.Time(h.DeadlineAt).After(arrival) {
		s.refuse(h.RequestID, protocol.CodeDeadlineExceeded,
			"deadlineAt %d had passed when the frame arrived at %d", h.DeadlineAt, protocol.Millis(arrival))
		return
	}
	replacing := replaced
	if s.supersede && !s.isDraining() {
		// A draining session refuses the new request (start): it
		// replaces nothing, and the requests in flight finish. So does a
		// server too loaded to take it, checked first: accepted work
		// keeps its promise. One that did replace a request is started
		// even if the drain began meanwhile, and whatever the in-flight
		// limit counts of the requests it ended: refused then, the client
		// would get neither answer.
		if !replaced && !s.srv.admitRequest() {
			s.overloaded(h.RequestID, arrival, overloadSaturated, "the server is saturated: try again shortly")
			return
		}
		replacing = s.endUnended(cancel.Replaced) > 0 || replaced
	}
	if req := s.start(ctx, h, arrival, replacing); req != nil {
		s.feed(req, a, arrival)
	}
}

// start accepts the request h opens and starts its pipeline, or refuses
// it with its one terminal message and returns nil. A request replacing
// one it ended (supersede, admitted by open; or a re-sent id, resend) is
// not refused for a drain that began after the replaced one was ended, nor
// for the in-flight limit: it takes that one's place.
func (s *Session) start(ctx context.Context, h *protocol.AudioHeader, arrival time.Time, replacing bool) *request {
	// A draining session refuses with unavailable whatever else would
	// refuse the request too (load, the in-flight limit): the client is
	// to send it again once it resumes elsewhere, not to retry here.
	if !replacing && s.isDraining() {
		s.refuse(h.RequestID, protocol.CodeUnavailable, "%s", protocol.MessageDraining)
		return nil
	}
	// A replacing request was admitted by open before it ended the ones
	// it replaces; those may stay registered until their terminals are
	// queued, and the in-flight limit would count them.
	if !replacing {
		if !s.srv.admitRequest() {
			s.overloaded(h.RequestID, arrival, overloadSaturated, "the server is saturated: try again shortly")
			return nil
		}
		if n := s.reqs.Len(); n >= s.srv.cfg.MaxInFlight {
			s.overloaded(h.RequestID, arrival, overloadInFlight,
				"%d requests already in flight on this session (limit %d)", n, s.srv.cfg.MaxInFlight)
			return nil
		}
	}
	req := s.newRequest(h, arrival)
	// Checking for a drain and registering happen under s.mu, which
	// closeIfDrained also holds: a drain cannot close the session
	// between the two and leave this request without its terminal message.
	s.mu.Lock()
	// A request replacing one is started in a drain, but not once the
	// drain's close is queued (the replaced request was the last in
	// flight and the linger was over): nothing would send its terminal
	// before the close, so it is refused like any request read then.
	if s.draining && (!replacing || s.closing) {
		s.mu.Unlock()
		s.refuse(h.RequestID, protocol.CodeUnavailable, "%s", protocol.MessageDraining)
		return nil
	}
	rctx, _, err := s.reqs.Register(ctx, h.RequestID, req, func(rctx context.Context, hd *cancel.Handle[*request]) {
		req.handle, req.ctx = hd, rctx
		req.expiry = time.AfterFunc(time.Hour, req.onExpiry) // armed below
	})
	s.mu.Unlock()
	if err != nil {
		// The reader is the only goroutine that registers, and it checked
		// the id: only a closed registry can fail here.
		s.refuse(h.RequestID, protocol.CodeUnavailable, "session closing")
		return nil
	}
	s.srv.metrics.inFlight.Inc()
	s.srv.inFlight.Add(1)
	req.rearm()
	s.noteRequest(h.RequestID)
	// The conversation, not the session: it outlives the connection (the
	// LLM's per-conversation cost cap counts by it).
	run := pipeline.Request{Audio: req.audio, Final: req.finalc, History: s.history, ConversationID: s.conv, Tenant: s.tenant, Log: req.log}
	if syn := s.srv.cfg.Speech; req.speech != nil && syn != nil {
		run.Speaker = speaker{syn: syn, voice: req.speech.Voice, rate: req.speech.SampleRate}
	}
	s.wg.Go(func() {
		defer req.recoverPanic()
		s.srv.runner.Run(rctx, run, req)
	})
	return req
}

// isDraining reports whether the session drains (no new request).
func (s *Session) isDraining() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.draining
}

// newRequest makes the state of a request opened by the frame h.
func (s *Session) newRequest(h *protocol.AudioHeader, arrival time.Time) *request {
	rate := cmp.Or(h.SampleRate, s.sampleRate)
	cfg := &s.srv.cfg
	req := &request{
		s:          s,
		id:         h.RequestID,
		log:        s.log.With("request", h.RequestID, "tenant", s.tenant),
		audio:      pipeline.NewFrameQueue(s.srv.audio),
		finalc:     make(chan context.Context, 1),
		sampleRate: rate,
		muLaw:      s.inbound.MuLaw,
		maxSamples: int64(cfg.MaxAudioPerRequest.Seconds() * float64(rate)),
		opened:     arrival,
		maxLife:    arrival.Add(cfg.MaxAudioPerRequest + cfg.MaxBudget),
		turn:       s.stream, // set only while the reader runs a server-turn stream
		speech:     s.speech,
	}
	req.heard.Store(arrival.UnixNano())
	req.speechMuLaw = s.inbound.MuLaw && s.speech != nil && s.speech.SampleRate == protocol.MuLawRate
	req.latestMs.Store(h.DeadlineAt)
	req.audio.WakeAfter(int(cfg.FeedBatch.Seconds() * float64(rate)))
	return req
}

// recoverPanic turns a panic in the request's pipeline into an internal
// error for this request alone, instead of a crash of the server.
func (r *request) recoverPanic() {
	if p := recover(); p != nil {
		r.log.Error("request panicked", "panic", p, "stack", string(debug.Stack()))
		r.s.endRequest(r, nil, protocol.Errorf(protocol.CodeInternal, "internal error"))
	}
}

// feed checks one frame of an open, not yet final request and queues it
// for the pipeline. A frame that breaks the request's rules ends it.
func (s *Session) feed(req *request, a *protocol.Audio, arrival time.Time) {
	h := &a.Header
	dl := protocol.Time(h.DeadlineAt)
	switch {
	case h.Seq != req.nextSeq:
		s.refuseFrame(req, protocol.Errorf(protocol.CodeBadMessage,
			"seq gap in request %q: got %d, want %d", req.id, h.Seq, req.nextSeq))
		return
	case h.SampleRate != 0 && h.SampleRate != req.sampleRate:
		s.refuseFrame(req, protocol.Errorf(protocol.CodeBadAudio,
			"sampleRate changed from %d to %d within request %q", req.sampleRate, h.SampleRate, req.id))
		return
	case s.inbound.MuLaw != req.muLaw:
		// A session.update changed the encoding while the request
		// streamed: its frames would be read in one encoding and
		// recognised at the other's rate.
		s.refuseFrame(req, protocol.Errorf(protocol.CodeBadAudio,
			"the inbound encoding changed within request %q (session.update): a request's frames are all in one encoding", req.id))
		return
	case !dl.After(arrival):
		s.endRequest(req, cancel.RequestDeadline, nil)
		return
	}
	n := int64(len(a.PCM) / 2)
	if req.muLaw {
		n = int64(len(a.PCM))
	}
	if req.samples+n > req.maxSamples {
		s.refuseFrame(req, protocol.Errorf(protocol.CodeBadAudio,
			"request %q exceeds the %v of audio allowed per request", req.id, s.srv.cfg.MaxAudioPerRequest))
		return
	}
	req.samples += n
	req.nextSeq++
	if prev := req.latestMs.Swap(h.DeadlineAt); h.DeadlineAt < prev {
		// The timer re-arms lazily for later deadlines, not for earlier.
		req.rearm()
	}
	if h.Final {
		// The deadline starts now, however far behind the recognizer is:
		// the pipeline gets it before the frame, so it cannot see the
		// frame first and take the deadline for absent.
		req.final = true
		req.finalc <- req.decideDeadline(dl, arrival)
	}
	// Counted before the pipeline can see the frame, so a client that
	// has the answer finds its frames counted.
	s.srv.metrics.frames.Inc()
	fr := pipeline.PooledFrame(int(n))
	fr.PCM, fr.SampleRate, fr.Final = a.Decode(fr.PCM, req.muLaw), req.sampleRate, h.Final
	if err := req.audio.Push(fr); err != nil {
		s.audioBufferFull(req)
	}
}

// audioBufferFull ends req, whose frame the server-wide audio budget
// (-max-buffered-audio) could not hold, with overloaded.
func (s *Session) audioBufferFull(req *request) {
	s.overloadedRequest(req, overloadAudioBuffer, "request %q: the server's buffer for audio waiting "+
		"to be recognized is full (%d MiB)", req.id, s.srv.audio.Limit()>>20)
}

// refuseFrame ends req for a frame that breaks its rules: the frame is
// bad input, counted as one that fails validation is (audioError).
func (s *Session) refuseFrame(req *request, perr *protocol.Error) {
	s.srv.metrics.badInput.WithLabelValues(string(perr.Code)).Inc()
	s.endRequest(req, nil, perr)
}

// decideDeadline fixes the request's deadline when its final frame
// arrives: the client's deadlineAt, but never more than the server's
// maximum budget after the arrival. It returns the context that carries it
// to the pipeline, which expires a terminal margin early so that the
// terminal message leaves in time; should the pipeline still not have
// answered then, the session answers for it. The streaming timer is done.
func (r *request) decideDeadline(clientDeadline, arrival time.Time) context.Context {
	cfg := &r.s.srv.cfg
	dl := deadline.Request(clientDeadline, arrival, cfg.MaxBudget)
	dctx, cancelD := context.WithDeadlineCause(r.ctx, dl.Add(-r.s.srv.terminalMargin()), cancel.RequestDeadline)
	backstop := func() {
		if errors.Is(context.Cause(dctx), cancel.RequestDeadline) {
			r.s.endRequest(r, cancel.RequestDeadline, nil)
		}
	}
	r.mu.Lock()
	r.finalAt, r.deadline = arrival, dl
	r.expiry.Stop()
	r.stopDeadline, r.stopBackstop = cancelD, context.AfterFunc(dctx, backstop)
	r.mu.Unlock()
	return dctx
}

// expiryAt is when the streaming timer should end the request: the newest
// frame's deadline less the terminal margin (a server turn, which has no
// client deadline: the stall bound after its newest frame), but no later
// than the request's longest life.
func (r *request) expiryAt() time.Time {
	at := protocol.Time(r.latestMs.Load()).Add(-r.s.srv.terminalMargin())
	if r.turn != nil {
		at = time.Unix(0, r.heard.Load()).Add(r.turn.stall)
	}
	if r.maxLife.Before(at) {
		return r.maxLife
	}
	return at
}

// rearm sets the streaming timer for expiryAt, unless the request has
// ended or its final frame has arrived.
func (r *request) rearm() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.ended && r.finalAt.IsZero() {
		r.expiry.Reset(time.Until(r.expiryAt()))
	}
}

// onExpiry ends the streaming request if its expiry has come; frames may
// have moved it since the timer was set, and then it re-arms. Deciding
// under mu keeps it from undoing a rearm that raced it.
func (r *request) onExpiry() {
	r.mu.Lock()
	if r.ended || !r.finalAt.IsZero() {
		r.mu.Unlock()
		return
	}
	if d := time.Until(r.expiryAt()); d > 0 {
		r.expiry.Reset(d)
		r.mu.Unlock()
		return
	}
	r.mu.Unlock()
	if now := time.Now(); r.turn != nil && now.Before(r.maxLife) {
		// A server turn whose audio stopped coming: its speech ends
		// where the audio did, and it is answered.
		r.s.stopTurn(r.turn, r, r.heardPos.Load(), r.streamPos.Load(), false, now)
		return
	}
	r.s.endRequest(r, cancel.RequestDeadline, nil)
}

// endRequest ends req from outside its pipeline: with a cancellation cause
// (the terminal message says which), or with a protocol error. For
// client_disconnect nothing is sent: there is no one to send to.
//
// The terminal message is decided before the request's work is stopped:
// a pipeline that sees its context end must find the request already
// ended, or it could answer first with what the cancellation looks like
// from inside (an internal error for a request the session failed).
func (s *Session) endRequest(req *request, cause *cancel.Cause, perr *protocol.Error) {
	s.endRequestCounting(req, cause, perr, nil)
}

// endRequestCounting is endRequest that also counts c (when not nil) if
// this end decides the terminal: one that loses the race ended nothing.
func (s *Session) endRequestCounting(req *request, cause *cancel.Cause, perr *protocol.Error, c prometheus.Counter) {
	stop := cause
	if cause == nil {
		stop = cancel.Failed
	}
	// The id is remembered (a tombstone) by finish, before it leaves the
	// registry, so that a frame of it read in between is ignored rather
	// than taken for a new request. Once only: each end takes one of the
	// session's -tombstones slots.
	start, live := time.Now(), req.ctx.Err() == nil
	if perr == nil {
		perr = causeError(cause)
	}
	var msg any
	switch {
	case perr != nil:
		msg = protocol.ErrorMessage{Type: protocol.TypeError, RequestID: req.id, Code: perr.Code, Message: perr.Message}
	case cause == cancel.ClientDisconnect:
		// Nobody to send it to now: the session keeps it for a resume.
		msg = protocol.ErrorMessage{Type: protocol.TypeError, RequestID: req.id, Code: protocol.CodeCancelled, Message: "connection lost"}
	}
	if !req.finishWith(msg, cause, stop, counting(c)) {
		// Ended already; its work may still be running (a request whose
		// terminal its pipeline sent is released, not cancelled).
		req.handle.Cancel(stop)
		return
	}
	if live {
		// How long until a goroutine waiting on the request's context
		// (as every running stage does) is running again. Only the end
		// that decided the terminal observes it: one that lost (to the
		// pipeline's result, or another end racing it) cancelled nothing
		// of its own. finish has cancelled the context: f runs at once, in
		// a goroutine of its own, as it would have on the cancel.
		m := s.srv.metrics
		context.AfterFunc(req.ctx, func() {
			m.cancelSeconds.WithLabelValues(stop.Name()).Observe(time.Since(start).Seconds())
		})
	}
}

// overloaded refuses the first frame of a request with overloaded.
func (s *Session) overloaded(id string, arrival time.Time, why, format string, args ...any) {
	s.srv.metrics.overloaded.WithLabelValues(why).Inc()
	s.sendInline(func() {
		s.refuseTimed(id, latency{since: arrival, to: s.srv.metrics.refusal}, protocol.Errorf(protocol.CodeOverloaded, format, args...))
	})
}

// overloadedRequest ends an accepted request with overloaded.
func (s *Session) overloadedRequest(req *request, why, format string, args ...any) {
	s.endRequestCounting(req, nil, protocol.Errorf(protocol.CodeOverloaded, format, args...),
		s.srv.metrics.overloaded.WithLabelValues(why))
}

// counting is a settle for finishWith that counts c, nil when c is: a
// count of how requests ended is taken by the end that decides the
// terminal, before its message is queued, never by one that lost.
func counting(c prometheus.Counter) func() func(context.Context) {
	if c == nil {
		return nil
	}
	return func() func(context.Context) {
		c.Inc()
		return nil
	}
}

// causeError is the terminal error of a request cancelled with cause, or
// nil when no message is to be sent.
func causeError(c *cancel.Cause) *protocol.Error {
	switch c {
	case cancel.Cancelled:
		return protocol.Errorf(protocol.CodeCancelled, "cancelled by the client")
	case cancel.Replaced:
		return protocol.Errorf(protocol.CodeReplaced, "replaced by a newer request")
	case cancel.Interrupted:
		return protocol.Errorf(protocol.CodeInterrupted, "interrupted: the caller spoke again")
	case cancel.RequestDeadline:
		return protocol.Errorf(protocol.CodeDeadlineExceeded, "the request's deadline passed before it could be answered")
	case cancel.Shutdown:
		return protocol.Errorf(protocol.CodeUnavailable, "server shutting down")
	}
	return nil
}

// emit sends a non-terminal event unless the request has already ended.
func (r *request) emit(v any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ended {
		return
	}
	r.s.send(v)
}

// finish sends the request's terminal message, once, and reports whether
// this call did: later calls do nothing. msg nil ends the request without
// a message (the client is gone). cause is the cancellation cause, nil for
// a request that completed or failed. stop, when not nil, is the cause the
// request's work is cancelled with once the message is decided; without
// it the request's context is just released.
//
// Everything a client could observe after the terminal message (the
// metrics, the registry that lets it reuse the id, the in-flight count) is
// settled before the message is queued. It all happens under mu, which
// emit holds while it sends, so no event can follow the terminal message,
// and a caller that loses the race returns only once the winner's message
// is queued (a session closing after its requests relies on that).
func (r *request) finish(msg any, cause, stop *cancel.Cause) bool {
	return r.finishWith(msg, cause, stop, nil)
}

// finishWith is finish that also runs settle, when this call wins the
// gate, before the terminal message is queued: bookkeeping a client may
// observe once it has the message (the session history its next request
// reads) must be in place by then. What settle returns, when not nil,
// runs next without mu (it writes to the conversation store), bounded by
// the request's deadline less the terminal margin; callers that lose the
// race meanwhile wait for the message to be queued, as they always do.
func (r *request) finishWith(msg any, cause, stop *cancel.Cause, settle func() func(context.Context)) bool {
	r.mu.Lock()
	if r.ended {
		settling := r.settling
		r.mu.Unlock()
		if settling != nil {
			// The wait may be long (a save bounded by the other
			// request's deadline): whatever the reader queued inline
			// until now, and anything queued meanwhile, goes to a writer.
			r.s.mu.Lock()
			r.s.inline = false
			if r.s.queuedLocked() > 0 {
				r.s.startWriterLocked()
			}
			r.s.mu.Unlock()
			<-settling
		}
		return false
	}
	r.ended = true
	r.expiry.Stop()
	dl := r.deadline
	if r.stopBackstop != nil {
		r.stopBackstop()
	} else {
		// Still streaming: the newest frame's deadline is the one to keep.
		dl = protocol.Time(r.latestMs.Load())
	}
	r.record(msg, cause, r.finalAt, time.Now())
	s := r.s
	s.addTombstone(r.id) // before deliver: the registry forgets it there
	var took latency
	if ns := r.cancelRead.Load(); ns != 0 && cause == cancel.Cancelled {
		took = latency{since: time.Unix(0, ns), to: s.srv.metrics.cancelToTerminal}
	}
	if settle != nil {
		if durable := settle(); durable != nil {
			r.settle(durable, dl)
		}
	}
	kept := s.deliver(r.handle, stop, msg, dl, took)
	if r.stopDeadline != nil {
		// After deliver, which ended its parent with the request's own
		// cause: this only releases the deadline's timer.
		r.stopDeadline()
	}
	if r.settling != nil {
		close(r.settling)
	}
	r.mu.Unlock()
	if kept {
		// The connection is gone (or the client resumed on another
		// session): the terminal goes on now, to the conversation's live
		// session or to the store, not once the slowest request still
		// running here has ended (teardown's flush), maybe past this
		// one's deadline.
		s.flushMissed()
	}
	s.closeIfDrained()
	if s.isDetached() {
		// The conversation's live session may drain, waiting for this
		// request of an older connection (closeIfDrained).
		if live := s.srv.liveSession(s.conv); live != nil && live != s {
			live.closeIfDrained()
		}
	}
	return true
}

// endUnended ends every request in flight whose terminal is not decided
// yet with cause (supersede, an interrupting server turn). One whose
// terminal is decided (maybe waiting for its history save) is not waited
// for: it stays registered until its terminal is queued, so a re-send of
// its id replaces it. It returns how many requests it ended.
func (s *Session) endUnended(cause *cancel.Cause) int {
	n := 0
	for _, h := range s.reqs.Handles() {
		if !h.Value.hasEnded() {
			s.endRequest(h.Value, cause, nil)
			n++
		}
	}
	return n
}

// cutSave ends the history save the request's terminal waits for, if
// one runs, or starts one cut: the terminal goes out at once, the history
// stays in the session, not yet durable, as when the store is too slow
// for the deadline.
func (r *request) cutSave() {
	r.mu.Lock()
	stop := r.stopSave
	// The pipeline may decide the result, and start its save, between
	// this and the caller's end of the request, which would then wait
	// for that save: it starts cut.
	r.saveCut = true
	r.mu.Unlock()
	if stop != nil {
		stop()
	}
}

// settle runs durable without mu, which is held on entry and on return,
// bounded by dl less the terminal margin: the terminal message still
// leaves in time however slow the store is. The request has ended, so
// nothing else of it runs meanwhile; settling tells the callers that
// lose the race to wait.
func (r *request) settle(durable func(context.Context), dl time.Time) {
	r.settling = make(chan struct{})
	ctx, cancel := context.WithDeadline(r.s.srv.base, dl.Add(-r.s.srv.terminalMargin()))
	defer cancel()
	r.stopSave = cancel
	if r.saveCut {
		cancel()
	}
	r.mu.Unlock()
	defer r.mu.Lock()
	durable(ctx)
}

// record counts the request's end in the metrics and logs it. Whether its
// terminal message beat the deadline is for the writer to tell.
func (r *request) record(msg any, cause *cancel.Cause, finalAt, now time.Time) {
	m := r.s.srv.metrics
	m.inFlight.Dec()
	r.s.srv.inFlight.Add(-1)
	if cause != nil {
		m.cancellations.WithLabelValues(cause.Name()).Inc()
	}
	typ, code := protocol.TypeResult, ""
	switch v := msg.(type) {
	case protocol.ErrorMessage:
		typ, code = protocol.TypeError, string(v.Code)
	case nil:
		typ = "none"
	}
	m.terminals.WithLabelValues(typ, code).Inc()
	if !finalAt.IsZero() {
		m.e2eSeconds.WithLabelValues(typ).Observe(now.Sub(finalAt).Seconds())
	}
	// The client's address only here, at debug level, as a refusal's: it
	// is personal data, and the request's info and warning lines (its
	// answer under -log-transcripts, an engine's failure) are kept where
	// debug lines are not.
	r.log.Debug("request ended", "type", typ, "code", code, "cause", causeName(cause), "addr", r.s.addr)
}

func causeName(c *cancel.Cause) string {
	if c == nil {
		return ""
	}
	return c.Name()
}

// Sink methods, called by the pipeline.

func (r *request) Transcript(text string, final bool) {
	r.emit(protocol.Transcript{Type: protocol.TypeTranscript, RequestID: r.id, Text: text, Final: final})
}

// Heard takes the recogniser's newest partial transcript, which covers
// the first covered samples of the request's audio (pipeline.HeardSink).
// Only a server turn's words matter: they may hold it (vad.Config.HoldMs).
func (r *request) Heard(text string, covered int64) {
	if r.turn != nil {
		r.words.Set(covered, turnwords.Unfinished(text))
	}
}

func (r *request) Intent(in pipeline.Intent) {
	r.emit(protocol.Intent{Type: protocol.TypeIntent, RequestID: r.id, Name: in.Name, Confidence: in.Confidence})
}

func (r *request) Retrieval(ps []pipeline.Passage) {
	out := make([]protocol.Passage, len(ps))
	for i, p := range ps {
		out[i] = protocol.Passage{ID: p.ID, Title: p.Title, Score: p.Score}
	}
	r.emit(protocol.Retrieval{Type: protocol.TypeRetrieval, RequestID: r.id, Passages: out})
}

func (r *request) AnswerDelta(text string) {
	r.emit(protocol.AnswerDelta{Type: protocol.TypeAnswerDelta, RequestID: r.id, Text: text})
}

// AnswerAudio sends a chunk of the spoken answer, numbered, under the
// same gate as every other event: none follows the terminal message.
// A chunk other than the final one waits, within ctx (the speech stage's
// budget), until the client's link can carry it and the terminal message
// before the deadline (see link), and is refused when ctx ends first. It
// is refused at once while the outbound queue is half full: a client
// reading slower than Flite speaks (about 20 times real time) then gets
// the rest of the answer as text only, and the queue keeps room for the
// text and the terminal message, instead of filling and closing the
// session as a slow client.
func (r *request) AnswerAudio(ctx context.Context, pcm []int16, rate int, final bool) bool {
	if !final && len(pcm) > 0 && !r.awaitLink(ctx, len(pcm)) {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ended || r.speech == nil {
		return false
	}
	if !final && r.s.backlogged() {
		return false
	}
	b64 := r.speech.Encoding == protocol.SpeechBase64
	hdr := protocol.AnswerAudioHeader{RequestID: r.id, Seq: r.audioSeq, SampleRate: rate, Final: final}
	if r.speechMuLaw {
		hdr.Encoding = protocol.EncodingMuLaw
	}
	var data []byte
	var err error
	if c := r.s.call; c != nil {
		if len(pcm) == 0 {
			return true // Twilio has no end-of-audio marker: the result's mark is it
		}
		data, err = c.media(pcm)
		b64 = true // a text message
	} else {
		data, err = protocol.EncodeAnswerAudio(hdr, pcm, b64)
	}
	if err != nil {
		r.log.Error("encode answer.audio", "err", err)
		return false
	}
	o := outbound{data: data, binary: !b64, play: playback{audio: r.s.call != nil}}
	if r.audioSeq == 0 {
		o.took = latency{since: r.finalAt, to: r.s.srv.metrics.firstAudio}
	}
	r.audioSeq++
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	return r.s.sendLocked(o)
}

// awaitLink waits until a chunk of samples more of answer audio fits the
// client's link before the request's deadline (less the terminal margin,
// when its work ends); false when ctx ends first. The link is looked at
// again every linkRecheck: it drains in the kernel, where nothing signals.
func (r *request) awaitLink(ctx context.Context, samples int) bool {
	r.mu.Lock()
	until, n := r.deadline, r.audioBytesLocked(samples)
	r.mu.Unlock()
	if !until.IsZero() {
		until = until.Add(-r.s.srv.terminalMargin())
	}
	var t *time.Timer
	for !r.s.linkFits(time.Now(), n, until) {
		if t == nil {
			t = time.NewTimer(linkRecheck)
			defer t.Stop()
		} else {
			t.Reset(linkRecheck)
		}
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
	}
	return true
}

// audioBytesLocked is about how many bytes a chunk of n samples takes on
// the wire, as the session sends it: 16-bit PCM or μ-law, binary or
// base64, or a phone call's μ-law media message; r.mu is held.
func (r *request) audioBytesLocked(n int) int64 {
	const header = 120 // the JSON around the audio, and the frame's
	b := int64(2 * n)
	switch {
	case r.s.call != nil:
		return int64(n)*4/3 + header // μ-law, base64 in JSON
	case r.speechMuLaw:
		b = int64(n)
	}
	if r.speech != nil && r.speech.Encoding == protocol.SpeechBase64 {
		b = b * 4 / 3
	}
	return b + header
}

// Done turns the pipeline's outcome into the terminal message, and
// reports whether it was (false: the request had ended already).
func (r *request) Done(res *pipeline.Result, err error) bool {
	if err != nil {
		return r.failed(err)
	}
	msg := r.resultMessage(res)
	// Only an exchange the client gets is context for the next one, and it
	// is remembered before the client has it: a next request sent on
	// receipt of this result must find it.
	// It is made durable before too (Redis: any instance then knows the
	// turn of a result its client has), within the request's deadline.
	sent := r.finishWith(msg, nil, nil, func() func(context.Context) {
		return r.s.remember(r.id, pipeline.Turn{User: res.Transcript, Assistant: res.Answer}, res.Speech)
	})
	// A result that lost the gate (cancelled, replaced, or ended at its
	// deadline just before) was never sent: it answered nothing.
	if sent && r.s.srv.cfg.LogTranscripts {
		r.log.Info("answered", "transcript", res.Transcript, "answer", res.Answer)
	}
	return sent
}

// failed ends the request with the pipeline's error, and reports whether
// that ended it.
func (r *request) failed(err error) bool {
	var cause *cancel.Cause
	if c, ok := errors.AsType[*cancel.Cause](err); ok {
		cause = c
	} else if errors.Is(err, context.DeadlineExceeded) {
		cause = cancel.RequestDeadline
	}
	switch cause {
	case cancel.ClientDisconnect:
		return r.finish(nil, cause, nil)
	case cancel.Failed:
		cause = nil // the session ended it and said why
	}
	pe := terminalError(err, cause)
	var overloaded prometheus.Counter
	if pe.Code == protocol.CodeOverloaded && cause == nil {
		why := overloadUpstream
		if errors.Is(err, pipeline.ErrNoRecognizer) {
			why = overloadRecognizer
		}
		overloaded = r.s.srv.metrics.overloaded.WithLabelValues(why)
	}
	sent := r.finishWith(protocol.ErrorMessage{Type: protocol.TypeError, RequestID: r.id, Code: pe.Code, Message: pe.Message}, cause, nil, counting(overloaded))
	if sent && cause == nil {
		// Logged here, once: the client gets only the code and a
		// message, which must not carry engine details. What the
		// client's own input caused (a deadline too short to start a
		// stage, audio the recogniser refuses) is an expected outcome,
		// at debug level: a client repeating it must not flood the log.
		level := slog.LevelWarn
		switch pe.Code {
		case protocol.CodeDeadlineExceeded, protocol.CodeBadAudio, protocol.CodeBadMessage:
			level = slog.LevelDebug
		}
		r.log.Log(context.Background(), level, "request failed", "code", pe.Code, "err", err)
	}
	return sent
}

// terminalError maps a pipeline error to the protocol error sent to the
// client. The messages are the server's own: engine errors can carry
// endpoint URLs or upstream bodies that are not the client's business.
func terminalError(err error, cause *cancel.Cause) *protocol.Error {
	if pe, ok := errors.AsType[*protocol.Error](err); ok {
		return pe
	}
	if be, ok := errors.AsType[*deadline.BudgetError](err); ok {
		return protocol.Errorf(protocol.CodeDeadlineExceeded, "not enough time left for %s", be)
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, cancel.RequestDeadline):
		return causeError(cancel.RequestDeadline)
	case errors.Is(err, cancel.Cancelled), errors.Is(err, cancel.Replaced), errors.Is(err, cancel.Interrupted),
		errors.Is(err, cancel.Shutdown):
		return causeError(cause)
	case errors.Is(err, pipeline.ErrNoRecognizer):
		return protocol.Errorf(protocol.CodeOverloaded, "the server is busy: no speech recognizer was free in time")
	case errors.Is(err, pipeline.ErrOverloaded):
		return protocol.Errorf(protocol.CodeOverloaded, "the server is busy: an upstream service is overloaded")
	case errors.Is(err, pipeline.ErrRateLimited):
		return protocol.Errorf(protocol.CodeRateLimited, "an upstream service is rate limiting requests")
	case errors.Is(err, pipeline.ErrPolicyBlocked):
		return protocol.Errorf(protocol.CodePolicyBlocked, "the answer was blocked by a content policy")
	case errors.Is(err, pipeline.ErrBadAudio):
		return protocol.Errorf(protocol.CodeBadAudio, "the audio could not be recognised")
	case errors.Is(err, pipeline.ErrUnavailable):
		return protocol.Errorf(protocol.CodeUnavailable, "a stage of the pipeline is unavailable")
	}
	// Internal errors may carry details not meant for clients.
	return protocol.Errorf(protocol.CodeInternal, "internal error")
}

// resultMessage is the result of a request that produced an answer. Its
// budget is the session's own: the deadline it decided when the final
// frame arrived.
func (r *request) resultMessage(res *pipeline.Result) protocol.Result {
	r.mu.Lock()
	finalAt, dl, cut := r.finalAt, r.deadline, r.cut
	r.mu.Unlock()
	ms := func(d time.Duration) *int64 { v := d.Milliseconds(); return &v }
	out := protocol.Result{
		Type:        protocol.TypeResult,
		RequestID:   r.id,
		Transcript:  res.Transcript,
		Answer:      res.Answer,
		Degraded:    res.Degraded(),
		Degradation: res.Degradation,
		Provider:    res.Provider,
		Sources:     sourcesOf(res.Sources),
		Timings:     protocol.Timings{Total: time.Since(finalAt).Milliseconds()},
		Budget: protocol.Budget{
			DeadlineAt:        protocol.Millis(dl),
			EffectiveBudgetMs: dl.Sub(finalAt).Milliseconds(),
			MaxBudgetMs:       r.s.srv.cfg.MaxBudget.Milliseconds(),
			ReserveMs:         res.Reserve.Milliseconds(),
			MinimumsMs:        millis(res.Minimums),
		},
	}
	out.ResumeToken = r.s.srv.issueToken(r.s.conv, r.s.tenants.id)
	if cut {
		out.Degradation = append(out.Degradation, ReasonTurnCut)
		out.Degraded = true
	}
	if out.Degradation == nil {
		out.Degradation = []string{}
	}
	if res.Intent != nil {
		out.Intent = &protocol.ResultIntent{Name: res.Intent.Name, Confidence: res.Intent.Confidence}
	}
	for stage, d := range res.Timings {
		switch stage {
		case pipeline.StageSTT:
			out.Timings.STT = ms(d)
		case pipeline.StageIntent:
			out.Timings.Intent = ms(d)
		case pipeline.StageRetrieval:
			out.Timings.Retrieval = ms(d)
		case pipeline.StageLLM:
			out.Timings.LLM = ms(d)
		case pipeline.StageTTS:
			out.Timings.TTS = ms(d)
		}
	}
	if !res.LLMStarted.IsZero() {
		out.Budget.LLMStartLeftMs = ms(dl.Sub(res.LLMStarted))
	}
	if sp := res.Speech; sp != nil {
		out.Speech = &protocol.ResultSpeech{Engine: sp.Engine, Voice: sp.Voice, Sentences: sp.Sentences,
			SpokenSentences: len(sp.Spoken), AudioMs: sp.Audio.Milliseconds()}
		if !sp.FirstAudio.IsZero() {
			out.Speech.FirstAudioMs = ms(sp.FirstAudio.Sub(finalAt))
		}
	}
	return out
}

// sourcesOf turns the passages an answer was built from into the result's
// sources; never nil, so that "sources" is always a list.
func sourcesOf(ps []pipeline.Passage) []protocol.Source {
	out := make([]protocol.Source, len(ps))
	for i, p := range ps {
		out[i] = protocol.Source{Article: domain.ArticleOf(p.ID), Passage: p.ID, Title: p.Title}
	}
	return out
}

// millis turns durations by name into whole milliseconds (at least 1 for
// any positive duration, so a cheap stage does not read as free).
func millis(m map[string]time.Duration) map[string]int64 {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]int64, len(m))
	for k, d := range m {
		out[k] = d.Milliseconds()
		if d > 0 && out[k] == 0 {
			out[k] = 1
		}
	}
	return out
}
