//go:build cgo && !nosphinx

package sttse2e

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/coder/websocket"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/pipeline"
	"github.com/voiced/voiced/internal/protocol"
	"github.com/voiced/voiced/internal/stages/stt/lm"
	"github.com/voiced/voiced/internal/stages/stt/sttest"
	"github.com/voiced/voiced/internal/vad"
)

// watched wraps the recogniser so that the test can wait, without
// sleeping, until the feeder has passed on the words of a turn heard up
// to a point: a turn is held only for a partial that covers its end of
// speech, and on a busy machine the recogniser may be behind the audio
// sent.
type watched struct {
	pipeline.Transcriber
	mu     sync.Mutex
	writes int           // Writes begun in the utterance; guarded by mu
	covers []int64       // what the partial each Write returned covers; guarded by mu
	wrote  chan struct{} // a Write began or returned (buffered 1)
}

func (w *watched) Start(ctx context.Context, rate int) (pipeline.Recognizer, error) {
	r, err := w.Transcriber.Start(ctx, rate)
	if err != nil {
		return nil, err
	}
	w.mu.Lock()
	w.writes, w.covers = 0, nil
	w.mu.Unlock()
	return &watchedRec{Recognizer: r, w: w}, nil
}

func (w *watched) signal() {
	select {
	case w.wrote <- struct{}{}:
	default:
	}
}

// passedOn reports whether the feeder has passed on a partial covering n
// samples of the turn, and whether one has been returned: the feeder
// passes each one on (pipeline.HeardSink) before it writes again.
func (w *watched) passedOn(n int64) (passed, returned bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i, c := range w.covers {
		if c >= n {
			return w.writes > i+1, true
		}
	}
	return false, false
}

// covered is what the newest partial returned covers.
func (w *watched) covered() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.covers) == 0 {
		return 0
	}
	return w.covers[len(w.covers)-1]
}

// waitHeard waits until the feeder has passed on a partial covering n
// samples of the turn. The recogniser writes what is queued on its own;
// once it has returned that partial, the next audio sent is certain to
// bring another Write if it wakes the feeder, which takes a
// session.Config.FeedBatch of audio queued (60 ms by default), so the
// test sends that much silence if none comes. It returns the
// milliseconds sent.
// feedBatchMs is session.Config.FeedBatch's default, which the test
// server keeps.
const feedBatchMs = 60

func (w *watched) waitHeard(t *testing.T, ctx context.Context, c *holdClient, n int64) int {
	sent := 0
	for {
		passed, returned := w.passedOn(n)
		if passed {
			return sent
		}
		if returned && sent == 0 {
			sent = feedBatchMs
			c.silence(sent)
		}
		select {
		case <-w.wrote:
		case <-ctx.Done():
			t.Fatalf("the recogniser's partial covers %d samples of the turn, want %d", w.covered(), n)
		}
	}
}

type watchedRec struct {
	pipeline.Recognizer
	w *watched
}

// Write counts the Writes begun and records what the partial each one
// returned covers (watched.passedOn).
func (r *watchedRec) Write(ctx context.Context, pcm []int16) (string, error) {
	r.w.mu.Lock()
	r.w.writes++
	r.w.mu.Unlock()
	r.w.signal()
	p, err := r.Recognizer.Write(ctx, pcm)
	covered := r.Covered()
	r.w.mu.Lock()
	r.w.covers = append(r.w.covers, covered)
	r.w.mu.Unlock()
	r.w.signal()
	return p, err
}

func (r *watchedRec) Covered() int64 { return r.Recognizer.(pipeline.Coverer).Covered() }

func (r *watchedRec) Hurry() {
	if h, ok := r.Recognizer.(pipeline.Hurrier); ok {
		h.Hurry()
	}
}

// counter reads a counter of reg.
func counter(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

// TestHoldUnfinishedTurn: a caller who pauses 800 ms after "the" (longer
// than silenceMs) is one turn with the whole sentence; a finished
// sentence still ends at silenceMs; with holdMs 0 the pause ends the turn,
// as before.
func TestHoldUnfinishedTurn(t *testing.T) {
	if !vad.Available {
		t.Skip("no voice activity detector in this build")
	}
	v, _ := sttest.VoiceByName("flite-slt")
	if !v.Available() {
		t.Skip("flite not installed")
	}
	w := &watched{wrote: make(chan struct{}, 1)}
	s := newServerWith(t, func(tr pipeline.Transcriber) pipeline.Transcriber {
		w.Transcriber = tr
		return w
	})
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	clip := func(text string) []int16 { // the clip up to where its sound ends
		if text == "" {
			return nil
		}
		pcm, r, err := sttest.Synth(ctx, v, text)
		require.NoError(t, err)
		require.Equal(t, holdRate, r)
		end := len(pcm)
		for end > 0 && max(pcm[end-1], -pcm[end-1]) < 300 {
			end--
		}
		return pcm[:end]
	}
	for _, tt := range []struct {
		name          string
		holdMs        string // "" for the default
		first, second string // said with a pause of 800 ms between them
		turns         int
		held, resumed float64
		maxErrs       int // word errors of the turns' transcripts joined
	}{
		{"held: one turn", "", "i want to return the", "table lamp i ordered on wednesday", 1, 1, 1, 2},
		// The cut costs words at its edges.
		{"holdMs 0: the pause ends the turn", `,"holdMs":0`, "i want to return the", "table lamp i ordered on wednesday", 2, 0, 0, 4},
		{"a finished sentence ends at silenceMs", "", "where is my order", "", 1, 0, 0, 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			conn := s.dial(t, ctx)
			held0 := counter(t, s.reg, "voiced_turns_held_total")
			resumed0 := counter(t, s.reg, "voiced_turns_held_resumed_total")
			// prefixMs 0: the turn's audio starts where its speech does
			// (audioStartMs), which places the words heard in the stream.
			require.NoError(t, conn.Write(ctx, websocket.MessageText,
				[]byte(`{"type":"session.update","turnDetection":{"mode":"server","prefixMs":0,"interrupt":false`+tt.holdMs+`}}`)))
			c := &holdClient{t: t, ctx: ctx, conn: conn}
			lead := make([]int16, holdRate/2)
			first := clip(tt.first)
			c.send(lead)
			c.send(first)
			// 400 ms into the pause, short of silenceMs: wait until the
			// recogniser has heard the words up to where they end, as it
			// has when it keeps up with the audio.
			c.silence(400)
			var started protocol.SpeechStarted
			require.NoError(t, c.until(protocol.TypeSpeechStarted).As(&started))
			heardTo := int64(len(lead)+len(first)) - started.AudioStartMs*holdRate/1000
			sent := w.waitHeard(t, ctx, c, heardTo)
			// 600 ms into the pause, past silenceMs by 100 ms: a turn
			// not held has stopped (the reader acts on frames in order,
			// and answers the ping after them).
			c.silence(200 - sent)
			stopped := c.stoppedBeforePong()
			require.Equal(t, tt.held == 0, stopped, "speech_stopped 600 ms into the pause")
			c.silence(200)
			c.send(clip(tt.second))
			c.silence(2000)
			c.stoppedBeforePong()
			// Results may have come before a pong: count every message.
			results := map[string]protocol.Result{}
			for i := 0; len(results) < tt.turns; i++ {
				if i == len(c.msgs) {
					c.read()
				}
				switch m := c.msgs[i]; m.Type {
				case protocol.TypeResult:
					var r protocol.Result
					require.NoError(t, m.As(&r))
					results[m.RequestID] = r
				case protocol.TypeError:
					t.Fatalf("turn failed: %s", m.Raw)
				}
			}
			var said []string
			for _, m := range c.msgs {
				if m.Type == protocol.TypeSpeechStarted {
					said = append(said, results[m.RequestID].Transcript)
				}
			}
			require.Len(t, said, tt.turns, "turns: %q", said)
			whole := strings.TrimSpace(tt.first + " " + tt.second)
			errs, _ := sttest.WordErrors(lm.Normalize(whole), strings.Join(said, " "))
			t.Logf("%d turn(s): %q (%d errors)", len(said), said, errs)
			require.LessOrEqual(t, errs, tt.maxErrs, "want %q, got %q", whole, said)
			require.Equal(t, tt.held, counter(t, s.reg, "voiced_turns_held_total")-held0)
			require.Equal(t, tt.resumed, counter(t, s.reg, "voiced_turns_held_resumed_total")-resumed0)
		})
	}
}

const holdRate = 16000

// holdClient streams a server-turn session's audio and keeps every
// message it reads.
type holdClient struct {
	t    *testing.T
	ctx  context.Context
	conn *websocket.Conn
	seq  int64
	msgs []protocol.ServerMessage
}

// send sends pcm in 20 ms frames, as fast as the connection takes them:
// the test waits on the recogniser where it matters.
func (c *holdClient) send(pcm []int16) {
	for i := 0; i < len(pcm); i += holdRate / 50 {
		f := pcm[i:min(i+holdRate/50, len(pcm))]
		require.NoError(c.t, c.conn.Write(c.ctx, websocket.MessageBinary, protocol.EncodeStreamAudio(nil, c.seq, 0, protocol.AppendPCM(nil, f))))
		c.seq++
	}
}

func (c *holdClient) silence(ms int) { c.send(make([]int16, ms*holdRate/1000)) }

func (c *holdClient) read() protocol.ServerMessage {
	_, b, err := c.conn.Read(c.ctx)
	require.NoError(c.t, err)
	m, err := protocol.DecodeServer(b)
	require.NoError(c.t, err)
	c.msgs = append(c.msgs, m)
	return m
}

// until reads up to a message of type typ and returns it.
func (c *holdClient) until(typ string) protocol.ServerMessage {
	for {
		if m := c.read(); m.Type == typ {
			return m
		}
	}
}

// stoppedBeforePong pings and reports whether an input.speech_stopped
// not read before came before the pong: whether the audio sent so far
// ended a turn.
func (c *holdClient) stoppedBeforePong() bool {
	require.NoError(c.t, c.conn.Write(c.ctx, websocket.MessageText, []byte(`{"type":"ping","clientTime":1}`)))
	from := len(c.msgs)
	c.until(protocol.TypePong)
	for _, m := range c.msgs[from:] {
		if m.Type == protocol.TypeSpeechStopped {
			return true
		}
	}
	return false
}
