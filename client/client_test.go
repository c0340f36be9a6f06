package client_test

import (
	"context"
	"errors"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/voiced/voiced/client"
	"github.com/voiced/voiced/internal/session"
	"github.com/voiced/voiced/internal/stages/sim"
	"github.com/voiced/voiced/internal/voicedtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const testTimeout = 20 * time.Second

// quick is a sim server whose stages take a few tens of milliseconds and
// never fail, so results come well inside the deadline.
var quick = sim.Config{Seed: 7, STTMedian: 20 * time.Millisecond, IntentMedian: 5 * time.Millisecond,
	RetrievalMedian: 5 * time.Millisecond, LLMMedian: 40 * time.Millisecond, Sigma: -1, SlowShare: -1, FailShare: -1}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

// tone is n 20 ms frames of a 440 Hz tone at 16 kHz.
func tone(n int) [][]int16 {
	frames := make([][]int16, n)
	for f := range frames {
		frames[f] = make([]int16, 320)
		for i := range frames[f] {
			frames[f][i] = int16(8000 * math.Sin(2*math.Pi*440*float64(f*320+i)/16000))
		}
	}
	return frames
}

// recorder collects a request's events.
type recorder struct {
	mu     sync.Mutex
	events []client.Event
}

func (r *recorder) add(ev client.Event) {
	r.mu.Lock()
	r.events = append(r.events, ev)
	r.mu.Unlock()
}

func (r *recorder) list() []client.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]client.Event(nil), r.events...)
}

// sendAll streams frames as one utterance, the last one final.
func sendAll(ctx context.Context, t *testing.T, r *client.Request, frames [][]int16, deadlineAt int64) {
	t.Helper()
	for i, pcm := range frames {
		require.NoError(t, r.Send(ctx, client.Frame{PCM: pcm, Final: i == len(frames)-1, DeadlineAt: deadlineAt}))
	}
}

func dial(ctx context.Context, t *testing.T, addr string, cfg client.Config) *client.Client {
	t.Helper()
	cfg.URL = "ws://" + addr + "/v1/session"
	c, err := client.Dial(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, c.Close()) })
	return c
}

// TestAgainstVoiced runs the protocol against a real voiced session
// server with simulated stages.
func TestAgainstVoiced(t *testing.T) {
	addr, _ := voicedtest.StartConfig(t, quick, session.Config{Tokens: []string{"tok-1"}})

	t.Run("refused without the bearer token", func(t *testing.T) {
		_, err := client.Dial(testCtx(t), client.Config{URL: "ws://" + addr + "/v1/session", Token: "wrong"})
		var he *client.HTTPError
		require.ErrorAs(t, err, &he)
		require.Equal(t, 401, he.Status)
		require.NotContains(t, err.Error(), "wrong")
	})

	t.Run("session.ready and clock alignment", func(t *testing.T) {
		c := dial(testCtx(t), t, addr, client.Config{Token: "tok-1"})
		ready := c.Ready()
		require.Equal(t, client.Subprotocol, ready.Protocol)
		require.NotEmpty(t, ready.SessionID)
		require.EqualValues(t, 1700, ready.MaxBudgetMs)
		require.Equal(t, 16000, ready.Audio.SampleRate)
		off, rtt := c.Offset()
		// Same machine, same clock: the offset is the rounding of the
		// server's milliseconds (under one) and the asymmetry of one
		// round trip, at most half of it. Not a fixed bound: on a loaded
		// machine the shortest of the pings' round trips can be tens of
		// milliseconds.
		require.LessOrEqual(t, off.Abs(), rtt/2+time.Millisecond, "rtt %v", rtt)
		require.Positive(t, rtt)
		require.Less(t, rtt, time.Second)
		now := time.Now()
		require.InDelta(t, float64(now.UnixMilli()), float64(c.ServerTime(now)), float64(rtt/2+2*time.Millisecond)/float64(time.Millisecond))
		require.WithinDuration(t, now, c.LocalTime(c.ServerTime(now)), time.Millisecond)
	})

	t.Run("events by requestId", func(t *testing.T) {
		ctx := testCtx(t)
		c := dial(ctx, t, addr, client.Config{Token: "tok-1"})
		recs := map[string]*recorder{"r1": {}, "r2": {}, "r3": {}}
		reqs := map[string]*client.Request{}
		for id, rec := range recs {
			r, err := c.Open(id, rec.add)
			require.NoError(t, err)
			reqs[id] = r
		}
		// Interleave the three utterances' frames, as concurrent streams.
		frames := tone(15)
		deadline := c.DeadlineIn(1500 * time.Millisecond)
		for i, pcm := range frames {
			for _, id := range []string{"r1", "r2", "r3"} {
				require.NoError(t, reqs[id].Send(ctx, client.Frame{PCM: pcm, Final: i == len(frames)-1, DeadlineAt: deadline}))
			}
		}
		for id, r := range reqs {
			term, err := r.Wait(ctx)
			require.NoError(t, err, id)
			require.Equal(t, client.TypeResult, term.Type, "%s: %s", id, term.Raw)
			var res client.Result
			require.NoError(t, term.Decode(&res))
			require.Equal(t, id, res.RequestID)
			require.NotEmpty(t, res.Answer)
			require.LessOrEqual(t, term.At, c.LocalTime(res.Budget.DeadlineAt).Add(5*time.Millisecond), "terminal after the deadline")

			evs := recs[id].list()
			require.NotEmpty(t, evs)
			var answer string
			finals := 0
			for i, ev := range evs {
				require.Equal(t, id, ev.RequestID, "an event of another request")
				require.Equal(t, i == len(evs)-1, ev.Terminal(), "exactly one terminal, last")
				require.False(t, ev.Replayed)
				switch ev.Type {
				case client.TypeAnswerDelta:
					var d client.AnswerDelta
					require.NoError(t, ev.Decode(&d))
					answer += d.Text
				case client.TypeTranscript:
					var tr client.Transcript
					require.NoError(t, ev.Decode(&tr))
					if tr.Final {
						finals++
					}
				}
			}
			require.Equal(t, 1, finals, "one final transcript")
			require.Equal(t, res.Answer, answer, "the deltas make the answer")
			require.Equal(t, term, evs[len(evs)-1])
			require.ErrorIs(t, r.Send(ctx, client.Frame{}), client.ErrRequestEnded)
		}
	})

	t.Run("cancel", func(t *testing.T) {
		ctx := testCtx(t)
		c := dial(ctx, t, addr, client.Config{Token: "tok-1"})
		r, err := c.Open("c-1", nil)
		require.NoError(t, err)
		require.NoError(t, r.Send(ctx, client.Frame{PCM: tone(1)[0], DeadlineAt: c.DeadlineIn(5 * time.Second)}))
		require.NoError(t, r.Cancel(ctx))
		term, err := r.Wait(ctx)
		require.NoError(t, err)
		e, ok := term.Error()
		require.True(t, ok, "%s", term.Raw)
		require.EqualValues(t, "cancelled", e.Code)
		require.NoError(t, r.Cancel(ctx), "cancel of an ended request is a no-op")
	})

	t.Run("deadline on the server clock", func(t *testing.T) {
		ctx := testCtx(t)
		c := dial(ctx, t, addr, client.Config{Token: "tok-1"})
		r, err := c.Open("d-1", nil)
		require.NoError(t, err)
		require.NoError(t, r.Send(ctx, client.Frame{PCM: tone(1)[0], Final: true, DeadlineAt: c.DeadlineIn(-time.Second)}))
		term, err := r.Wait(ctx)
		require.NoError(t, err)
		e, ok := term.Error()
		require.True(t, ok, "%s", term.Raw)
		require.EqualValues(t, "deadline_exceeded", e.Code)
	})

	t.Run("stray and session-level messages", func(t *testing.T) {
		ctx := testCtx(t)
		var mu sync.Mutex
		var stray []client.Event
		c := dial(ctx, t, addr, client.Config{Token: "tok-1", OnUnrouted: func(ev client.Event) {
			mu.Lock()
			stray = append(stray, ev)
			mu.Unlock()
		}})
		r, err := c.Open("s-1", nil)
		require.NoError(t, err)
		// A cancel for an id the session never saw is a session-level
		// bad_message.
		other, err := c.Open("never-sent", nil)
		require.NoError(t, err)
		require.NoError(t, other.Cancel(ctx))
		sendAll(ctx, t, r, tone(3), 0) // DeadlineAt 0: now + maxBudgetMs
		term, err := r.Wait(ctx)
		require.NoError(t, err)
		require.Equal(t, client.TypeResult, term.Type, "%s", term.Raw)
		mu.Lock()
		defer mu.Unlock()
		require.Len(t, stray, 1)
		e, ok := stray[0].Error()
		require.True(t, ok)
		require.EqualValues(t, "bad_message", e.Code)
		require.Empty(t, stray[0].RequestID)
	})

	t.Run("bad requestId", func(t *testing.T) {
		c := dial(testCtx(t), t, addr, client.Config{Token: "tok-1"})
		_, err := c.Open("no spaces", nil)
		require.ErrorContains(t, err, "invalid requestId")
	})
}

// TestServerDrain: the server's shutdown reaches the client as
// session.draining, then the close; without reconnection the client
// ends and its requests are answered first.
func TestServerDrain(t *testing.T) {
	ctx := testCtx(t)
	addr, srv := voicedtest.StartServer(t, quick)
	draining, barrier := make(chan struct{}), make(chan struct{}, 1)
	c, err := client.Dial(ctx, client.Config{URL: "ws://" + addr + "/v1/session", Reconnect: client.Reconnect{Disabled: true},
		OnUnrouted: func(ev client.Event) {
			switch ev.Type {
			case client.TypeSessionDraining:
				close(draining)
			case client.TypeError:
				barrier <- struct{}{}
			}
		}})
	require.NoError(t, err)
	defer c.Close()
	r, err := c.Open("before-drain", nil)
	require.NoError(t, err)
	require.NoError(t, r.Send(ctx, client.Frame{PCM: tone(1)[0], DeadlineAt: c.DeadlineIn(1500 * time.Millisecond)}))
	// The server reads in order: once the cancel of an unknown id is
	// answered, the request is open on the server.
	sync, err := c.Open("barrier", nil)
	require.NoError(t, err)
	require.NoError(t, sync.Cancel(ctx))
	<-barrier

	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	shut := make(chan error, 1)
	go func() { shut <- srv.Shutdown(sctx) }()
	select {
	case <-draining:
	case <-ctx.Done():
		t.Fatal("no session.draining")
	}
	require.True(t, c.Draining())
	// The request in flight finishes when its final frame comes in time.
	require.NoError(t, r.Send(ctx, client.Frame{PCM: tone(1)[0], Final: true, DeadlineAt: c.DeadlineIn(1500 * time.Millisecond)}))
	term, err := r.Wait(ctx)
	require.NoError(t, err)
	require.Equal(t, client.TypeResult, term.Type, "%s", term.Raw)
	select {
	case <-c.Done():
	case <-ctx.Done():
		t.Fatal("client did not end with the session")
	}
	require.ErrorIs(t, c.Err(), client.ErrConnectionLost)
	require.NoError(t, <-shut)
	_, err = c.Open("after", nil)
	require.True(t, errors.Is(err, client.ErrConnectionLost))
}

// TestReconnectToVoiced: the network drops under a session with a request
// still streaming. The client resumes the conversation on a new session:
// the request ends with the terminal voiced kept for it (cancelled,
// "connection lost"), replayed once, and the new session serves requests.
func TestReconnectToVoiced(t *testing.T) {
	ctx := testCtx(t)
	addr := voicedtest.Start(t, quick)
	p := voicedtest.NewProxy(t, addr)
	var mu sync.Mutex
	var sessions []string
	var lost []error
	c := dial(ctx, t, p.Addr, client.Config{
		Reconnect:    client.Reconnect{Initial: 20 * time.Millisecond, Max: 100 * time.Millisecond},
		OnConnect:    func(r client.SessionReady) { mu.Lock(); sessions = append(sessions, r.SessionID); mu.Unlock() },
		OnDisconnect: func(err error) { mu.Lock(); lost = append(lost, err); mu.Unlock() },
	})
	// The request is cut once voiced has it for sure: its first partial
	// transcript (after half a second of audio) has come back.
	heard := make(chan struct{}, 1)
	r, err := c.Open("in-flight", func(ev client.Event) {
		if ev.Type == client.TypeTranscript {
			select {
			case heard <- struct{}{}:
			default:
			}
		}
	})
	require.NoError(t, err)
	dl := c.DeadlineIn(5 * time.Second)
	for _, pcm := range tone(30) {
		require.NoError(t, r.Send(ctx, client.Frame{PCM: pcm, DeadlineAt: dl}))
	}
	select {
	case <-heard:
	case <-ctx.Done():
		t.Fatal("no partial transcript")
	}
	first := c.Ready()
	p.Cut()

	term, err := r.Wait(ctx)
	require.NoError(t, err)
	require.Equal(t, client.TypeError, term.Type, "%s", term.Raw)
	require.Contains(t, string(term.Raw), `"code":"cancelled","message":"connection lost"`)
	// The replay can reach the request before the client has finished
	// connecting (OnConnect runs once it has).
	require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(sessions) == 2 }, 10*time.Second, time.Millisecond)
	require.ErrorIs(t, r.Send(ctx, client.Frame{PCM: tone(1)[0]}), client.ErrRequestEnded)

	next, err := c.Open("after-reconnect", nil)
	require.NoError(t, err)
	sendAll(ctx, t, next, tone(5), 0)
	term, err = next.Wait(ctx)
	require.NoError(t, err)
	require.Equal(t, client.TypeResult, term.Type, "%s", term.Raw)
	require.NotEqual(t, first.SessionID, c.Ready().SessionID, "a new session")
	require.True(t, c.Ready().Resumed)
	require.Equal(t, first.ConversationID, c.Ready().ConversationID)
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, sessions, 2)
	require.Len(t, lost, 1)
}
