package loadgen

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/coder/websocket"

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
	var u struct {
		Type          string         `json:"type"`
		Encoding      string         `json:"encoding,omitempty"`
		TurnDetection map[string]any `json:"turnDetection,omitempty"`
	}
	u.Type = protocol.TypeSessionUpdate
	if c.r.cfg.MuLaw {
		u.Encoding = protocol.EncodingMuLaw
	}
	if c.r.cfg.Turns == TurnsServer {
		u.TurnDetection = map[string]any{"mode": protocol.TurnsServer, "interrupt": false,
			"budgetMs": min(max(c.budget.Milliseconds(), protocol.MinBudgetMs), protocol.MaxBudgetMs)}
	}
	if u.Encoding == "" && u.TurnDetection == nil {
		return nil
	}
	b, _ := json.Marshal(u)
	if err := c.ws.Write(ctx, websocket.MessageText, b); err != nil {
		return fmt.Errorf("session.update: %w", err)
	}
	return nil
}

// turnStarted registers a turn the server detected (its
// input.speech_started, received at at). c.mu is held.
func (c *conn) turnStarted(id string, at time.Time) []*attempt {
	a := &attempt{id: id, kind: kindTurn, opened: at, done: make(chan struct{}), offset: c.offset, firstSent: at}
	c.byID[id] = append(c.byID[id], a)
	c.turns = append(c.turns, a)
	c.r.record(a)
	return c.byID[id]
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
	buf   []byte
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
		case <-s.c.dead:
			return errStopped
		case <-s.timer.C:
		}
		var payload []byte
		if s.c.r.cfg.MuLaw {
			payload = mulaw.AppendEncode(nil, f)
		} else {
			payload = protocol.AppendPCM(nil, f)
		}
		s.buf = protocol.EncodeStreamAudio(s.buf[:0], s.seq, 0, payload)
		if err := s.c.write(ctx, websocket.MessageBinary, s.buf); err != nil {
			return err
		}
		s.seq++
		s.c.r.frames.Add(1)
	}
	return nil
}
