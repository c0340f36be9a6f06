package loadgen

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/voiced/voiced/client"
	"github.com/voiced/voiced/internal/audio/mulaw"
	"github.com/voiced/voiced/internal/audio/resample"
	"github.com/voiced/voiced/internal/protocol"
)

// Turn modes (Config.Turns).
const (
	TurnsClient = "client"
	TurnsServer = "server"
)

// minTurnGap is the shortest silence between two utterances of a
// server-turn stream: the server ends a turn after 500 ms of silence
// (its default silenceMs), so a shorter gap would join two utterances.
const minTurnGap = 700 * time.Millisecond

// tailSilence ends a session's stream, so that its last turn ends.
const tailSilence = 1500 * time.Millisecond

// setUp sends the session.update the run's audio needs: μ-law, server
// turns (interrupt off: a turn starting while the previous one is
// answered queues beside it, so every detected turn must be answered).
func (c *conn) setUp(ctx context.Context) error {
	var u client.SessionUpdate
	if c.r.cfg.MuLaw {
		enc := protocol.EncodingMuLaw
		u.Encoding = &enc
	}
	if c.r.cfg.Turns == TurnsServer {
		off := false
		budget := int(min(max(c.budget.Milliseconds(), protocol.MinBudgetMs), protocol.MaxBudgetMs))
		u.TurnDetection = &protocol.TurnDetection{Mode: protocol.TurnsServer, Interrupt: &off, BudgetMs: &budget}
	}
	if u.Encoding == nil && u.TurnDetection == nil {
		return nil
	}
	if err := c.cl.Update(ctx, u); err != nil {
		return fmt.Errorf("session.update: %w", err)
	}
	return nil
}

// turnStarted registers a turn the server detected, from its
// input.speech_started (which the client routed to no request: the id
// is the server's); the turn's later messages come to onEvent.
func (c *conn) turnStarted(ev client.Event) {
	a := &attempt{id: ev.RequestID, kind: kindTurn, opened: ev.At, done: make(chan struct{}), offset: c.offset, firstSent: ev.At,
		audioStartMs: -1, audioEndMs: -1}
	var st protocol.SpeechStarted
	if ev.Decode(&st) == nil {
		a.audioStartMs = st.AudioStartMs
	}
	c.mu.Lock()
	req, err := c.cl.Open(ev.RequestID, func(ev client.Event) { c.onEvent(a, ev) })
	a.req = req
	a.events++
	c.byID[a.id] = append(c.byID[a.id], a)
	c.turns = append(c.turns, a)
	if err != nil && !c.ending {
		c.markGone(a, goneServerClosed)
	}
	c.mu.Unlock()
	c.r.record(a)
}

// turnRefused records a turn the server detected but refused (overloaded
// while saturated, or at the in-flight limit): it gets its terminal
// message and no input.speech_started, so the client has no request for
// it. It counts as a detected turn that ended with that error.
func (c *conn) turnRefused(ev client.Event) {
	c.mu.Lock()
	a := &attempt{id: ev.RequestID, kind: kindTurn, opened: ev.At, done: make(chan struct{}), offset: c.offset,
		audioStartMs: -1, audioEndMs: -1, term: terminalOf(ev), excusable: true}
	close(a.done)
	c.byID[a.id] = append(c.byID[a.id], a)
	c.turns = append(c.turns, a)
	c.mu.Unlock()
	c.r.ended.Add(1)
	c.r.record(a)
}

// isTurnID reports whether id is one the server assigns to its turns.
func isTurnID(id string) bool { return strings.HasPrefix(id, protocol.TurnIDPrefix) }

// turnStopped notes a turn's input.speech_stopped, received at at: the
// turn's final frame, as far as the client can tell. Its deadline is the
// server's detection plus the budget; the client's view of it (now plus
// the budget) is a little later, so a result's own deadline, reported in
// its budget, is the one checked. c.mu is held.
func (c *conn) turnStopped(a *attempt, ev client.Event) {
	a.finalSent = ev.At
	a.deadline = ev.At.Add(c.budget)
	a.deadlineAt = protocol.Millis(a.deadline.Add(c.offset))
	var st protocol.SpeechStopped
	if ev.Decode(&st) == nil {
		a.audioEndMs = st.AudioEndMs
	}
}

// streamUtt is one utterance of a server-turn stream: where it lies in
// the stream (ms from the stream's first sample, as the server counts
// audioStartMs and audioEndMs) and its true end of speech in real time:
// when the stream's schedule reached its end, as a live source's speaker
// stops then. (Not when its last frame was sent: after a stall of the
// client the frames behind schedule go out in a burst, and the silence
// that ends the turn with them.)
type streamUtt struct {
	startMs, endMs int64
	end            time.Time
}

// turnOutcome is what the turns of one stream made of its utterances.
type turnOutcome struct {
	// missed: utterances no turn covers (refused turns, which have no
	// position, are taken to cover one each); merged: utterances whose
	// turn also covers the next one; false: turns covering no utterance.
	missed, merged, falseTurns int
	// From an utterance's true end to its turn's input.speech_stopped
	// and to its result, for utterances that end their turn.
	toStopped, toResult []time.Duration
}

// matchTurns matches a stream's utterances to the turns the server found
// in it by position: a turn covers an utterance when their spans
// overlap. turns are in the order the server started them.
func matchTurns(utts []streamUtt, turns []*attempt) turnOutcome {
	var out turnOutcome
	refused := 0
	covers := make([]int, len(turns)) // utterances each turn covers
	last := make([]int, len(utts))    // the turn that covers an utterance last; -1 none
	for i := range turns {
		if turns[i].audioStartMs < 0 {
			refused++
		}
	}
	for i, u := range utts {
		last[i] = -1
		for j, a := range turns {
			if a.audioStartMs < 0 || a.audioStartMs > u.endMs {
				continue
			}
			if a.audioEndMs >= 0 && a.audioEndMs < u.startMs {
				continue
			}
			covers[j]++
			last[i] = j
		}
	}
	unmatched := 0
	for i, u := range utts {
		j := last[i]
		if j < 0 {
			unmatched++
			continue
		}
		if i+1 < len(utts) && last[i+1] == j {
			out.merged++ // its end is not the turn's end
			continue
		}
		a := turns[j]
		if !a.finalSent.IsZero() {
			out.toStopped = append(out.toStopped, a.finalSent.Sub(u.end))
		}
		if a.term != nil && a.term.code == "result" {
			out.toResult = append(out.toResult, a.term.at.Sub(u.end))
		}
	}
	out.missed = max(unmatched-refused, 0)
	for j, a := range turns {
		if covers[j] == 0 && a.audioStartMs >= 0 {
			out.falseTurns++
		}
	}
	return out
}

// noteTurns adds a finished stream's outcome to the run's.
func (r *runner) noteTurns(o turnOutcome) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.turnsOut.missed += o.missed
	r.turnsOut.merged += o.merged
	r.turnsOut.falseTurns += o.falseTurns
	r.turnsOut.toStopped = append(r.turnsOut.toStopped, o.toStopped...)
	r.turnsOut.toResult = append(r.turnsOut.toResult, o.toResult...)
}

// streamUtterances converts the run's utterances to the stream's rate.
func streamUtterances(utts []Utterance, rate int) ([]Utterance, error) {
	out := make([]Utterance, len(utts))
	for i, u := range utts {
		if u.SampleRate == rate {
			out[i] = u
			continue
		}
		rs, err := resample.New(u.SampleRate, rate)
		if err != nil {
			return nil, err
		}
		out[i] = Utterance{Name: u.Name, SampleRate: rate, Samples: rs.Flush(rs.Process(nil, u.Samples))}
	}
	return out, nil
}

// turnsSlot is one server-turn session: it streams utterances with gaps
// of silence, in real time, until the run stops, then silence for the
// last turn to end, and waits for every turn detected. When the server
// closes the session (a drain, a lost connection) it opens a new one
// and streams on, as the client-turn slots re-dial.
func (r *runner) turnsSlot(ctx, stop context.Context) {
	rng := r.rng()
	// Stagger the first turns, so that sessions do not speak in step.
	lead := uniform(rng, r.cfg.Think+r.utts[0].Duration())
	for stop.Err() == nil {
		c := r.connect(ctx)
		if c == nil {
			sleep(stop, redialBackoff)
			continue
		}
		more := r.turnsStream(ctx, stop, c, rng, lead)
		r.disconnect(c, false)
		if !more {
			return
		}
		lead = 0
	}
}

// turnsStream streams on c, after lead of silence, until the run stops
// or the session ends, and matches the stream's utterances to its turns.
// It reports whether the session ended with the run's -requests bound
// not used up.
func (r *runner) turnsStream(ctx, stop context.Context, c *conn, rng *rand.Rand, lead time.Duration) (more bool) {
	st := &streamer{c: c, rate: r.utts[0].SampleRate, start: time.Now()}
	defer st.stop()
	var utts []streamUtt
	if st.silence(ctx, lead) != nil {
		return true
	}
	more = true
	for stop.Err() == nil && c.alive() {
		if !r.reserve(1) {
			more = false
			break
		}
		from := st.pos
		err := st.send(ctx, r.utts[rng.IntN(len(r.utts))].Samples)
		if st.pos > from {
			// Cut short or not, the server may have found its turn: a
			// part left out was matched to no utterance, a false turn.
			r.uttsSent.Add(1)
			utts = append(utts, streamUtt{startMs: from * 1000 / int64(st.rate), endMs: st.pos * 1000 / int64(st.rate), end: st.due()})
		}
		if err != nil {
			break
		}
		if st.silence(ctx, max(minTurnGap, r.cfg.Think/2+uniform(rng, r.cfg.Think))) != nil {
			break
		}
	}
	// A stream cut short (the server closed the session: a drain, say)
	// still has its turns matched: skipping them left its results
	// untimed and its missed turns unchecked.
	cut := st.silence(ctx, tailSilence) != nil
	c.mu.Lock()
	turns := append([]*attempt(nil), c.turns...)
	c.mu.Unlock()
	for _, a := range turns {
		c.wait(ctx, a)
		a.release()
	}
	c.mu.Lock()
	turns = append(turns[:0], c.turns...)
	if cut {
		utts, turns = heardBefore(utts, turns)
	}
	o := matchTurns(utts, turns)
	c.mu.Unlock()
	r.noteTurns(o)
	return more
}

// heardBefore keeps what a stream cut short can be judged on: the
// utterances that start before the last turn the server placed ended,
// and the turns up to that one. The cut may have kept the later
// utterances' turns from being detected, so they do not count as
// missed; the turns refused after it (a drain's) covered those.
func heardBefore(utts []streamUtt, turns []*attempt) ([]streamUtt, []*attempt) {
	last := -1
	for i, a := range turns {
		if a.audioStartMs >= 0 {
			last = i
		}
	}
	if last >= 0 && turns[last].audioEndMs < 0 {
		return utts, turns // still open at the cut: it covers the rest
	}
	end := int64(-1)
	if last >= 0 {
		end = turns[last].audioEndMs
	}
	n := 0
	for n < len(utts) && utts[n].startMs <= end {
		n++
	}
	return utts[:n], turns[:last+1]
}

// streamer sends a server-turn session's continuous stream, paced in
// real time against its start.
type streamer struct {
	c     *conn
	rate  int
	start time.Time
	seq   int64
	pos   int64 // samples sent
	timer *time.Timer
}

// due is when the next frame is due: the stream's schedule, which the
// frames keep unless the client falls behind.
func (s *streamer) due() time.Time { return s.start.Add(time.Duration(s.seq) * FrameDuration) }

func (s *streamer) stop() {
	if s.timer != nil {
		s.timer.Stop()
	}
}

func (s *streamer) silence(ctx context.Context, d time.Duration) error {
	return s.send(ctx, make([]int16, int(d*time.Duration(s.rate)/time.Second)))
}

// send streams pcm in 20 ms frames.
func (s *streamer) send(ctx context.Context, pcm []int16) error {
	n := s.rate / int(time.Second/FrameDuration)
	for len(pcm) > 0 {
		f := pcm[:min(n, len(pcm))]
		pcm = pcm[len(f):]
		d := time.Until(s.due())
		if s.timer == nil {
			s.timer = time.NewTimer(d)
		} else {
			s.timer.Reset(d)
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-s.c.dead():
			return errStopped
		case <-s.timer.C:
		}
		var payload []byte
		if s.c.r.cfg.MuLaw {
			payload = mulaw.AppendEncode(nil, f)
		} else {
			payload = protocol.AppendPCM(nil, f)
		}
		if err := s.c.cl.StreamFrame(ctx, s.seq, payload); err != nil {
			return err
		}
		s.seq++
		s.pos += int64(len(f))
		s.c.r.frames.Add(1)
	}
	return nil
}
