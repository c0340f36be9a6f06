package session

import (
	"context"
	"log/slog"
	"time"

	"github.com/voiced/voiced/internal/audio/resample"
	"github.com/voiced/voiced/internal/cancel"
	"github.com/voiced/voiced/internal/pipeline"
	"github.com/voiced/voiced/internal/protocol"
	"github.com/voiced/voiced/internal/vad"
)

// Server turn detection. In this mode the client streams audio with only
// a sequence number, and the session's reader runs it through one
// Endpointer (the reader owns it: no goroutine of its own). A turn the
// endpointer finds becomes a request with a server-assigned id (t-1,
// t-2, …) whose audio is the turn's, pre-roll included; its end is the
// request's final frame, and its deadline is decided there, as for a
// client's final frame (decideDeadline), from the turn's budget. A turn
// whose audio stops coming ends where it stopped once the stall bound
// has passed without a frame (the request's streaming timer, stopTurn).

// ReasonTurnCut is the degradation of a server turn that reached
// -max-audio and was ended there by the server.
const ReasonTurnCut = "turn_cut"

// minTurnStall is the shortest stall bound: a turn ends when no frame
// has come for its silenceMs, or this if longer, so that the jitter of
// an ordinary link (frames come in bursts) does not end a turn.
const minTurnStall = time.Second

// turnStream is a server-turn session's audio stream. It is owned by the
// session's reader goroutine.
type turnStream struct {
	ep      *vad.Endpointer
	rs      *resample.Resampler // to rate; nil when the client's rate is a detector rate
	inRate  int                 // the client's rate
	rate    int                 // the endpointer's, and the turns' audio's
	nextSeq int64
	cfg     protocol.Turns
	budget  time.Duration
	stall   time.Duration // no audio for this long ends the turn being spoken
	cur     *request      // the turn being spoken; nil when none, or it was refused or has ended
	curFrom int64         // the stream position of cur's first sample (its pre-roll's)
	// playedOut is when the audio received so far ends if it is played
	// in real time from its arrival: a long frame, or a burst sent
	// faster than real time, is not a stall while its audio lasts.
	playedOut time.Time
	// cutAt: the last turn was cut at -max-audio at this stream position
	// (0: it was not; a turn has audio, so a cut is never at 0). A turn
	// whose speech starts right there (within the endpointer's hangover)
	// is the same speech going on, and does not interrupt it; speech
	// after a pause is a new turn that does.
	cutAt int64
	pcm   []int16 // decoding buffer
	rpcm  []int16 // resampling buffer
}

// prepareTurns checks what a session.update asks of the inbound encoding
// and turn detection, and returns the function that applies it once the
// whole update is accepted. An update that touches turn detection, the
// rate or the encoding of a server-turn session starts its stream
// afresh: a turn being spoken ends there, and seq and positions count
// from the next frame.
func (s *Session) prepareTurns(u *protocol.SessionUpdate) (func(), error) {
	mu := s.inbound.MuLaw
	if u.Encoding != nil {
		mu = *u.Encoding == protocol.EncodingMuLaw
	}
	rate := s.sampleRate
	switch {
	case u.SampleRate != nil:
		rate = *u.SampleRate
	case u.Encoding != nil && mu:
		rate = protocol.MuLawRate // "encoding":"mulaw" alone means 8000 Hz
	}
	if mu && rate != protocol.MuLawRate {
		if u.SampleRate != nil {
			return nil, protocol.Errorf(protocol.CodeBadAudio, "session.update: mu-law audio is at %d Hz only, not %d (the session's encoding is mu-law)", protocol.MuLawRate, rate)
		}
		return nil, protocol.Errorf(protocol.CodeBadAudio, "session.update: mu-law audio is at %d Hz only; the session's rate is %d (send \"sampleRate\":%d with it)", protocol.MuLawRate, rate, protocol.MuLawRate)
	}
	server := s.stream != nil
	cfg := protocol.Turns{}
	if s.stream != nil {
		cfg = s.stream.cfg
	}
	if td := u.TurnDetection; td != nil {
		server = td.Mode == protocol.TurnsServer
		cfg = td.Resolved()
	}
	restart := u.TurnDetection != nil || u.SampleRate != nil || u.Encoding != nil
	if !restart {
		return func() {}, nil
	}
	var next *turnStream
	if server {
		var err error
		if next, err = s.newTurnStream(rate, cfg); err != nil {
			return nil, err
		}
	}
	return func() {
		if server && !s.inbound.ServerTurns {
			s.endStreaming()
		}
		s.endTurns(time.Now())
		s.inbound = protocol.Inbound{ServerTurns: server, MuLaw: mu}
		s.sampleRate = rate
		s.stream = next
	}, nil
}

// endStreaming ends, with bad_message, the client-turn requests still
// receiving audio as the session switches to server turns: in server mode
// a frame names no request, so their final frame could never come, and
// they would wait for their deadline. Those whose final frame has come
// are answered as usual. It runs on the reader's goroutine, which owns
// each request's final flag.
func (s *Session) endStreaming() {
	for _, h := range s.reqs.Handles() {
		if req := h.Value; !req.final && !req.hasEnded() {
			s.endRequest(req, nil, protocol.Errorf(protocol.CodeBadMessage,
				"request %q: the session switched to server turns (session.update) before its final frame, which can no longer be sent", req.id))
		}
	}
}

// newTurnStream makes the stream of a server-turn session whose client
// sends audio at rate Hz.
func (s *Session) newTurnStream(rate int, cfg protocol.Turns) (*turnStream, error) {
	ts := &turnStream{inRate: rate, rate: rate, cfg: cfg}
	if !validDetectorRate(rate) {
		ts.rate = protocol.DefaultSampleRate
		rs, err := s.srv.filters.Get(rate, ts.rate)
		if err != nil {
			return nil, protocol.Errorf(protocol.CodeBadAudio, "server turn detection: sampleRate %d: %v", rate, err)
		}
		ts.rs = rs
	}
	ts.stall = max(time.Duration(cfg.SilenceMs)*time.Millisecond, minTurnStall)
	maxBudget := s.srv.cfg.MaxBudget
	ts.budget = maxBudget
	if cfg.BudgetMs > 0 {
		ts.budget = min(time.Duration(cfg.BudgetMs)*time.Millisecond, maxBudget)
	}
	newDet := s.srv.cfg.Detector
	if newDet == nil {
		newDet = func(rate int) (vad.Detector, error) { return vad.New(rate, vad.Options{}) }
	}
	det, err := newDet(ts.rate)
	if err != nil {
		// Warned once per server: every session.update asking for server
		// turns gets here, and a client may send them in a loop.
		level := warnFirst(s.srv.vadWarned.CompareAndSwap(false, true))
		s.log.Log(context.Background(), level, "server turn detection unavailable", "err", err)
		return nil, protocol.Errorf(protocol.CodeBadMessage, "session.update: server turn detection is not available on this server")
	}
	prefix := cfg.PrefixMs
	if prefix == 0 {
		prefix = -1 // none: 0 means the default to the endpointer
	}
	maxTurn := int(min(max(s.srv.cfg.MaxAudioPerRequest.Milliseconds(), vad.MinMaxTurnMs), vad.MaxMaxTurnMs))
	ep, err := vad.NewEndpointer(det, ts.rate, vad.Config{
		SilenceMs: cfg.SilenceMs, PrefixMs: prefix, MinSpeechMs: cfg.MinSpeechMs, MaxTurnMs: maxTurn, HoldMs: cfg.HoldMs,
	})
	if err != nil {
		det.Close()
		// The protocol's ranges lie within the endpointer's.
		return nil, protocol.Errorf(protocol.CodeBadMessage, "session.update: turnDetection: %v", err)
	}
	ep.SetWords(ts)
	ts.ep = ep
	return ts, nil
}

// Unfinished tells the endpointer whether the words of the turn being
// spoken, as its recogniser last heard them, stop unfinished at the end
// of speech end (vad.Words): the pipeline's goroutine sets them
// (request.Heard), counted from the turn's first sample, and the reader
// reads them here. A turn that has ended (cancelled) is not held.
func (ts *turnStream) Unfinished(end int64) bool {
	cur := ts.live()
	return cur != nil && cur.words.Unfinished(end-ts.curFrom)
}

func validDetectorRate(rate int) bool {
	for _, r := range vad.Rates {
		if r == rate {
			return true
		}
	}
	return false
}

// endTurns ends the session's stream, if it has one: a turn being spoken
// ends where its speech did, as if its silence had come.
func (s *Session) endTurns(now time.Time) {
	ts := s.stream
	if ts == nil {
		return
	}
	ts.syncStall(s.srv.metrics)
	for _, ev := range ts.ep.Flush() {
		s.turnEvent(context.Background(), ts, ev, now)
	}
	ts.ep.Close()
	s.stream = nil
}

// closeTurns releases the stream when the session ends; its requests
// are being cancelled.
func (s *Session) closeTurns() {
	if s.stream != nil {
		s.stream.syncStall(s.srv.metrics) // a stalled turn being answered is final (lostConnection)
		s.stream.ep.Close()
		s.stream = nil
	}
}

// maxKeptSamples is the largest decoding buffer a stream keeps between
// frames: 170 ms at 48 kHz, several of the frames clients send.
const maxKeptSamples = 8 << 10

// streamAudio takes the next frame of a server-turn session's stream.
func (s *Session) streamAudio(ctx context.Context, a *protocol.Audio, arrival time.Time) {
	ts := s.stream
	ts.syncStall(s.srv.metrics)
	h := &a.Header
	if h.Seq != ts.nextSeq {
		perr := protocol.Errorf(protocol.CodeBadMessage, "seq gap in the audio stream: got %d, want %d", h.Seq, ts.nextSeq)
		if cur := ts.live(); cur != nil {
			s.srv.metrics.badInput.WithLabelValues(string(perr.Code)).Inc()
			s.endRequest(cur, nil, perr) // the turn being spoken lost audio
		} else {
			s.badInput(perr, "")
		}
		// The stream goes on from this frame.
	}
	ts.nextSeq = h.Seq + 1
	if h.SampleRate != 0 && h.SampleRate != ts.inRate {
		s.badInput(protocol.Errorf(protocol.CodeBadAudio,
			"frame seq %d: sampleRate %d differs from the stream's %d (change it with session.update)", h.Seq, h.SampleRate, ts.inRate), "")
		return
	}
	s.srv.metrics.frames.Inc()
	ts.pcm = a.Decode(ts.pcm[:0], s.inbound.MuLaw)
	pcm := ts.pcm
	if ts.rs != nil {
		ts.rpcm = ts.rs.Process(ts.rpcm[:0], pcm)
		pcm = ts.rpcm
	}
	evs, err := ts.ep.Write(pcm)
	// The buffers are kept for the next frame, unless this one was far
	// larger than frames are (one message of -max-message-bytes decodes
	// to up to 512 KiB): the stream may last hours.
	if cap(ts.pcm) > maxKeptSamples {
		ts.pcm = nil
	}
	if cap(ts.rpcm) > maxKeptSamples {
		ts.rpcm = nil
	}
	for _, ev := range evs {
		s.turnEvent(ctx, ts, ev, arrival)
	}
	if ts.playedOut.Before(arrival) {
		ts.playedOut = arrival
	}
	ts.playedOut = ts.playedOut.Add(time.Duration(len(pcm)) * time.Second / time.Duration(ts.rate))
	if cur := ts.cur; cur != nil {
		// A stall ends the turn where its audio stopped; a held turn's
		// silence has come, and it ends where its speech did.
		pos := ts.ep.Pos()
		if end, held := ts.ep.Held(); held {
			pos = end
		}
		cur.heardPos.Store(pos)
		cur.streamPos.Store(ts.ep.Pos())
		cur.heard.Store(ts.playedOut.UnixNano())
	}
	if err != nil {
		// Frames are cut to the detector's length: this is a bug.
		s.log.Error("voice activity detector failed", "err", err)
	}
}

// streamError reports an invalid frame of a server-turn session's
// stream: a session-level error; a frame whose seq could be read still
// counts in the sequence.
func (s *Session) streamError(a *protocol.Audio, err error) {
	if ts := s.stream; a.Header.Seq == ts.nextSeq {
		ts.nextSeq++
	}
	s.badInput(err, "")
}

// live returns the turn being spoken unless it has already ended
// (cancelled, or failed) or its speech has stopped (a stall).
func (ts *turnStream) live() *request {
	if ts.cur == nil {
		return nil
	}
	ts.cur.mu.Lock()
	defer ts.cur.mu.Unlock()
	if ts.cur.ended || ts.cur.stopped {
		return nil
	}
	return ts.cur
}

// syncStall catches the reader up with a turn its streaming timer ended
// on a stall (stopTurn): the turn is final, and the endpointer's turn
// ends too, so that audio coming now is the stream's (speech in it is a
// new turn). The events of that end are the timer's, already acted on,
// but for the holds the turn waited through, counted in m.
func (ts *turnStream) syncStall(m *Metrics) {
	cur := ts.cur
	if cur == nil {
		return
	}
	cur.mu.Lock()
	stopped := cur.stopped
	cur.mu.Unlock()
	if stopped {
		cur.final = true
		ts.cur = nil
		for _, ev := range ts.ep.Flush() {
			m.countHolds(ev)
		}
	}
}

// ms converts a stream position to milliseconds from its first frame.
func (ts *turnStream) ms(pos int64) int64 { return pos * 1000 / int64(ts.rate) }

// turnEvent acts on what the endpointer found.
func (s *Session) turnEvent(ctx context.Context, ts *turnStream, ev vad.Event, arrival time.Time) {
	switch ev.Kind {
	case vad.SpeechStarted:
		// Numbered per session, across stream restarts, so that an id is
		// never reused while an earlier turn of it may be in flight; in
		// a resumed session marked with the session too, as the earlier
		// sessions' turns may still end here (their missed terminals).
		goesOn := ts.cutAt > 0 && ev.Pos-ts.cutAt <= int64(vad.DefaultHangoverMs*ts.rate/1000)
		ts.cutAt = 0
		replacing := false
		if ts.cfg.Interrupt && !goesOn {
			switch {
			case s.call != nil:
				// The caller's speech clears what the call plays (clear):
				// the turn in flight ends, whatever becomes of this one,
				// and then what Twilio holds of it is dropped. Not for
				// speech going on after a cut: the cut turn is answered,
				// and heard.
				s.endUnended(cancel.Interrupted)
				s.bargeIn()
			case !s.isDraining() && s.srv.admitRequest():
				// As a request with supersede: a turn the server
				// refuses (draining, saturated) interrupts nothing, and
				// the turn in flight is answered; one that interrupted
				// takes its place, and is not refused for the in-flight
				// limit or a drain begun since.
				replacing = s.endUnended(cancel.Interrupted) > 0
			}
		}
		id := s.nextTurnID()
		// The turn streams until its speech stops, which the endpointer
		// reports by -max-audio at the latest, or its audio stalls (the
		// streaming timer, see expiryAt): no client deadline applies.
		far := protocol.Millis(arrival.Add(s.srv.cfg.MaxAudioPerRequest + s.srv.cfg.MaxBudget + time.Minute))
		ts.cur, ts.curFrom = s.start(ctx, &protocol.AudioHeader{RequestID: id, DeadlineAt: far, SampleRate: ts.rate}, arrival, replacing), ev.From
		started := protocol.SpeechStarted{Type: protocol.TypeSpeechStarted, RequestID: id, AudioStartMs: ts.ms(ev.Pos)}
		if ts.cur == nil {
			// Refused, with its terminal message (a call has stopped
			// what it plays all the same, above).
			return
		}
		ts.cur.emit(started)
		s.pushTurn(ts, ts.cur, ev.Audio)
	case vad.TurnAudio:
		if cur := ts.live(); cur != nil {
			s.pushTurn(ts, cur, ev.Audio)
		}
	case vad.SpeechStopped:
		s.srv.metrics.countHolds(ev)
		cur := ts.cur
		ts.cur, ts.cutAt = nil, 0
		if ev.Cut {
			ts.cutAt = ev.Pos
		}
		if cur == nil {
			return
		}
		// Final whether this ends it or a stall did, just now.
		cur.final = true
		s.stopTurn(ts, cur, ev.Pos, ev.At, ev.Cut, arrival)
	}
}

// stopTurn ends the speech of a turn at stream position pos, decided at
// stream position decided and time at: the reader's when the endpointer
// found its end, the streaming timer's when its audio stopped coming.
// Whichever comes first ends it; the other does nothing.
func (s *Session) stopTurn(ts *turnStream, cur *request, pos, decided int64, cut bool, at time.Time) {
	cur.mu.Lock()
	if cur.ended || cur.stopped {
		cur.mu.Unlock()
		return
	}
	// Set before the final frame is queued: pushTurn pushes none of the
	// turn's audio after it.
	cur.stopped, cur.cut = true, cut
	cur.mu.Unlock()
	cur.emit(protocol.SpeechStopped{Type: protocol.TypeSpeechStopped, RequestID: cur.id, AudioEndMs: ts.ms(pos), DecidedMs: ts.ms(max(decided, pos))})
	// The end of speech is the turn's final frame: its deadline is
	// decided now, the way a client's final frame decides it.
	cur.finalc <- cur.decideDeadline(at.Add(ts.budget), at)
	if err := cur.audio.Push(pipeline.Frame{SampleRate: ts.rate, Final: true}); err != nil {
		s.audioBufferFull(cur)
	}
}

// nextTurnID numbers the next server turn. The client may name its own
// requests t-N too (in client mode, before it switched): an id it has in
// flight, or one that ended recently, is skipped, so that a turn never
// fails to register under a live id (a second terminal message for the
// client's request) nor repeats the id of a request just ended.
func (s *Session) nextTurnID() string {
	for {
		s.turnN++
		id := protocol.TurnID(s.turnN)
		if s.resumeAsked {
			id = protocol.ResumedTurnID(s.id, s.turnN)
		}
		if _, taken := s.reqs.Get(id); !taken && !s.tombstoned(id) {
			return id
		}
	}
}

// pushTurn queues audio of a turn for its recognizer, unless its speech
// has stopped: a stall may end it (stopTurn) while the reader works on a
// frame, and its final frame must be the last it queues.
func (s *Session) pushTurn(ts *turnStream, req *request, pcm []int16) {
	req.mu.Lock()
	if req.stopped {
		req.mu.Unlock()
		return
	}
	req.samples += int64(len(pcm))
	err := req.audio.Push(pipeline.Frame{PCM: pcm, SampleRate: ts.rate})
	req.mu.Unlock()
	if err != nil {
		s.audioBufferFull(req)
	}
}

// hasEnded reports whether the request has had its terminal message.
func (r *request) hasEnded() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ended
}

// warnFirst is the level of a log line a peer can make the server repeat:
// warning the first time, debug after, so that it cannot flood the log.
func warnFirst(first bool) slog.Level {
	if first {
		return slog.LevelWarn
	}
	return slog.LevelDebug
}
