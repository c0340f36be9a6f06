package loadgen

import (
	"context"
	"fmt"
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
	a := &attempt{id: ev.RequestID, kind: kindTurn, opened: ev.At, done: make(chan struct{}), offset: c.offset, firstSent: ev.At}
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

// turnStopped notes a turn's input.speech_stopped, received at at: the
// turn's final frame, as far as the client can tell. Its deadline is the
// server's detection plus the budget; the client's view of it (now plus
// the budget) is a little later, so a result's own deadline, reported in
// its budget, is the one checked. c.mu is held.
func (c *conn) turnStopped(a *attempt, at time.Time) {
	a.finalSent = at
	a.deadline = at.Add(c.budget)
	a.deadlineAt = protocol.Millis(a.deadline.Add(c.offset))
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
// last turn to end, and waits for every turn detected.
func (r *runner) turnsSlot(ctx, stop context.Context) {
	rng := r.rng()
	var c *conn
	for c == nil {
		if c = r.connect(ctx); c == nil && !sleep(stop, redialBackoff) {
			return
		}
	}
	defer r.disconnect(c, false)
	st := &streamer{c: c, rate: r.utts[0].SampleRate, start: time.Now()}
	defer st.stop()
	// Stagger the first turns, so that sessions do not speak in step.
	if st.silence(ctx, uniform(rng, r.cfg.Think+r.utts[0].Duration())) != nil {
		return
	}
	for stop.Err() == nil && c.alive() {
		if !r.reserve(1) {
			break
		}
		if st.send(ctx, r.utts[rng.IntN(len(r.utts))].Samples) != nil {
			break
		}
		r.uttsSent.Add(1)
		if st.silence(ctx, max(minTurnGap, r.cfg.Think/2+uniform(rng, r.cfg.Think))) != nil {
			break
		}
	}
	if st.silence(ctx, tailSilence) != nil {
		return
	}
	c.mu.Lock()
	turns := append([]*attempt(nil), c.turns...)
	c.mu.Unlock()
	for _, a := range turns {
		c.wait(ctx, a)
	}
}

// streamer sends a server-turn session's continuous stream, paced in
// real time against its start.
type streamer struct {
	c     *conn
	rate  int
	start time.Time
	seq   int64
	timer *time.Timer
}

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
		d := time.Until(s.start.Add(time.Duration(s.seq) * FrameDuration))
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
		s.c.r.frames.Add(1)
	}
	return nil
}
