package client_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/client"
	"github.com/voiced/voiced/internal/protocol"
)

// fake is a small voiced stand-in for the resume tests: voiced does not
// resume sessions yet. Each connection attempt n (from 0) is handled by
// the test's handler, which may refuse it with an HTTP status or accept
// it and script the session.
type fake struct {
	*httptest.Server
	mu       sync.Mutex
	attempts []*http.Request // every upgrade request, in order
	handle   func(n int, w http.ResponseWriter, r *http.Request)
}

func newFake(t *testing.T, handle func(n int, w http.ResponseWriter, r *http.Request)) *fake {
	f := &fake{handle: handle}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		n := len(f.attempts)
		f.attempts = append(f.attempts, r)
		f.mu.Unlock()
		f.handle(n, w, r)
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *fake) url() string { return "ws" + strings.TrimPrefix(f.URL, "http") + "/v1/session" }

func (f *fake) requests() []*http.Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*http.Request(nil), f.attempts...)
}

// fakeSession is one accepted fake connection.
type fakeSession struct {
	t  *testing.T
	ws *websocket.Conn
}

// accept upgrades with voiced.v1 and sends session.ready with extra.
func accept(t *testing.T, w http.ResponseWriter, r *http.Request, extra map[string]any) *fakeSession {
	ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{protocol.Name}})
	if err != nil {
		t.Errorf("accept: %v", err)
		return nil
	}
	s := &fakeSession{t: t, ws: ws}
	ready := map[string]any{"type": "session.ready", "protocol": protocol.Name, "sessionId": "s-" + r.URL.Query().Get("resume"),
		"serverTime": time.Now().UnixMilli(), "maxBudgetMs": 1700, "audio": map[string]any{"encoding": "pcm_s16le", "sampleRate": 16000, "channels": 1}}
	for k, v := range extra {
		ready[k] = v
	}
	s.send(ready)
	return s
}

func (s *fakeSession) send(v any) {
	b, _ := json.Marshal(v)
	_ = s.ws.Write(context.Background(), websocket.MessageText, b)
}

func result(id string) map[string]any {
	return map[string]any{"type": "result", "requestId": id, "transcript": "where is my order", "answer": "It ships today.",
		"degraded": false, "degradation": []string{}, "provider": "extractive", "timings": map[string]any{"total": 10},
		"budget": map[string]any{"deadlineAt": time.Now().Add(time.Second).UnixMilli(), "maxBudgetMs": 1700, "effectiveBudgetMs": 1700}}
}

// withToken adds a fresh resume token to a result, as voiced sends it.
func withToken(m map[string]any, tok string) map[string]any {
	m["resumeToken"] = tok
	return m
}

// serve answers pings and hands each audio frame to onAudio until the
// connection ends or onAudio returns false (then it drops the
// connection, as a lost network or a killed instance would).
func (s *fakeSession) serve(onAudio func(h protocol.AudioHeader) bool) {
	for {
		typ, b, err := s.ws.Read(context.Background())
		if err != nil {
			return
		}
		if typ == websocket.MessageBinary {
			a, err := protocol.DecodeBinaryAudio(b)
			if err != nil {
				s.t.Errorf("fake: bad frame: %v", err)
				return
			}
			if onAudio != nil && !onAudio(a.Header) {
				_ = s.ws.CloseNow()
				return
			}
			continue
		}
		m, err := protocol.DecodeText(b)
		if err != nil {
			s.t.Errorf("fake: bad message %s: %v", b, err)
			return
		}
		if p, ok := m.(*protocol.Ping); ok {
			s.send(protocol.Pong{Type: protocol.TypePong, ClientTime: p.ClientTime, ServerTime: time.Now().UnixMilli()})
		}
	}
}

// counter counts each request's events.
type counter struct {
	mu    sync.Mutex
	terms map[string][]client.Event
	other []client.Event // unrouted
}

func newCounter() *counter { return &counter{terms: map[string][]client.Event{}} }

func (c *counter) handler(ev client.Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ev.Terminal() {
		c.terms[ev.RequestID] = append(c.terms[ev.RequestID], ev)
	}
}

func (c *counter) unrouted(ev client.Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.other = append(c.other, ev)
}

// TestResumeDeliversMissedTerminalsOnce: the connection drops with one
// request answered, one whose final frame arrived and one still
// streaming. The client resumes with the token of the last
// session.ready; the resumed session replays the three terminal messages
// (one the client already had); each request gets its own exactly once.
func TestResumeDeliversMissedTerminalsOnce(t *testing.T) {
	ctx := testCtx(t)
	f := newFake(t, nil)
	f.handle = func(n int, w http.ResponseWriter, r *http.Request) {
		switch n {
		case 0:
			s := accept(t, w, r, map[string]any{"instance": "a", "conversationId": "conv-1", "resumeToken": "tok-1"})
			seen := map[string]bool{}
			s.serve(func(h protocol.AudioHeader) bool {
				if h.RequestID == "answered" && h.Final {
					s.send(withToken(result("answered"), "tok-1b"))
				}
				seen[h.RequestID] = true
				// Drop once all three have sent their frames.
				return !(seen["answered"] && seen["final-sent"] && seen["streaming"])
			})
		case 1:
			require.Equal(t, "tok-1b", r.URL.Query().Get("resume"), "the last result's token")
			require.Equal(t, "Bearer key-1", r.Header.Get("Authorization"))
			s := accept(t, w, r, map[string]any{"instance": "b", "conversationId": "conv-1", "resumeToken": "tok-2", "resumed": true})
			s.send(withToken(result("answered"), "tok-stale")) // the client had it: dropped
			s.send(withToken(result("final-sent"), "tok-stale"))
			s.send(map[string]any{"type": "error", "requestId": "streaming", "code": "cancelled", "message": "connection lost"})
			s.serve(func(h protocol.AudioHeader) bool {
				if h.Final {
					s.send(withToken(result(h.RequestID), "tok-3"))
				}
				return true
			})
		default:
			http.Error(w, "unexpected", http.StatusInternalServerError)
		}
	}
	cnt := newCounter()
	connects := make(chan client.SessionReady, 4)
	c, err := client.Dial(ctx, client.Config{URL: f.url(), Token: "key-1", OnUnrouted: cnt.unrouted,
		OnConnect: func(r client.SessionReady) { connects <- r },
		Reconnect: client.Reconnect{Initial: 10 * time.Millisecond, Max: 50 * time.Millisecond}})
	require.NoError(t, err)
	defer c.Close()
	<-connects
	require.Equal(t, "tok-1", c.Ready().ResumeToken)

	reqs := map[string]*client.Request{}
	for _, id := range []string{"answered", "final-sent", "streaming"} {
		reqs[id], err = c.Open(id, cnt.handler)
		require.NoError(t, err)
	}
	frame := tone(1)[0]
	require.NoError(t, reqs["answered"].Send(ctx, client.Frame{PCM: frame, Final: true}))
	term, err := reqs["answered"].Wait(ctx)
	require.NoError(t, err)
	require.False(t, term.Replayed)
	require.Equal(t, "tok-1b", c.Ready().ResumeToken, "a result's fresh token is kept")
	require.NoError(t, reqs["final-sent"].Send(ctx, client.Frame{PCM: frame, Final: true}))
	require.NoError(t, reqs["streaming"].Send(ctx, client.Frame{PCM: frame}))

	ready := <-connects
	require.True(t, ready.Resumed)
	require.Equal(t, "b", ready.Instance)
	require.Equal(t, "conv-1", ready.ConversationID)
	require.Equal(t, "tok-2", c.Ready().ResumeToken)

	term, err = reqs["final-sent"].Wait(ctx)
	require.NoError(t, err)
	require.Equal(t, client.TypeResult, term.Type)
	require.True(t, term.Replayed)
	term, err = reqs["streaming"].Wait(ctx)
	require.NoError(t, err)
	e, ok := term.Error()
	require.True(t, ok)
	require.EqualValues(t, "cancelled", e.Code)
	require.True(t, term.Replayed)
	require.ErrorIs(t, reqs["streaming"].Send(ctx, client.Frame{PCM: frame}), client.ErrRequestEnded)
	require.Equal(t, "tok-2", c.Ready().ResumeToken, "a replayed result's token is older than session.ready's")

	// The resumed session carries on.
	after, err := c.Open("after", cnt.handler)
	require.NoError(t, err)
	require.NoError(t, after.Send(ctx, client.Frame{PCM: frame, Final: true}))
	term, err = after.Wait(ctx)
	require.NoError(t, err)
	require.False(t, term.Replayed)
	require.Equal(t, "tok-3", c.Ready().ResumeToken, "a live result's token, not a replayed one's")

	cnt.mu.Lock()
	defer cnt.mu.Unlock()
	for _, id := range []string{"answered", "final-sent", "streaming", "after"} {
		require.Len(t, cnt.terms[id], 1, id)
	}
	require.Len(t, cnt.other, 1, "the duplicate goes to no request")
	require.Equal(t, "answered", cnt.other[0].RequestID)
	require.True(t, cnt.other[0].Replayed)
}

// TestReconnect covers the reconnection paths without a resume: a
// server that refuses for a while, a refused resume token, a server that
// never comes back and one that refuses for good.
func TestReconnect(t *testing.T) {
	policy := client.Reconnect{Initial: 20 * time.Millisecond, Max: 200 * time.Millisecond, Attempts: 4}
	tests := []struct {
		name string
		// first: the first session.ready's extra fields.
		first map[string]any
		// later answers attempt n >= 1: a status to refuse with, or 0 to
		// accept with a new session.
		later        func(n int) int
		wantAttempts int
		wantResumeQ  []string // the resume query of each attempt
		wantErr      error    // the client's end, nil if it reconnects
		minWait      time.Duration
	}{
		{name: "503 twice then a new session", later: func(n int) int {
			if n < 3 {
				return http.StatusServiceUnavailable
			}
			return 0
		}, wantAttempts: 4, wantResumeQ: []string{"", "", "", ""},
			// backoffs of attempts 0, 1, 2 are at least 10, 20, 40 ms
			minWait: 70 * time.Millisecond},
		{name: "refused resume token: a new session at once", first: map[string]any{"resumeToken": "old"}, later: func(n int) int {
			if n == 1 {
				return http.StatusUnauthorized
			}
			return 0
		}, wantAttempts: 3, wantResumeQ: []string{"", "old", ""}},
		{name: "gives up after the attempts", later: func(int) int { return http.StatusServiceUnavailable },
			wantAttempts: 5, wantErr: client.ErrConnectionLost},
		{name: "forbidden: no retry", later: func(int) int { return http.StatusForbidden },
			wantAttempts: 2, wantErr: client.ErrConnectionLost},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := testCtx(t)
			dropped := make(chan time.Time, 1)
			f := newFake(t, nil)
			f.handle = func(n int, w http.ResponseWriter, r *http.Request) {
				if n == 0 {
					s := accept(t, w, r, tt.first)
					s.serve(func(protocol.AudioHeader) bool { dropped <- time.Now(); return false })
					return
				}
				if status := tt.later(n); status != 0 {
					http.Error(w, "refused in test", status)
					return
				}
				accept(t, w, r, nil).serve(nil)
			}
			connects := make(chan time.Time, 4)
			c, err := client.Dial(ctx, client.Config{URL: f.url(), Reconnect: policy, OnConnect: func(client.SessionReady) { connects <- time.Now() }})
			require.NoError(t, err)
			defer c.Close()
			<-connects
			r, err := c.Open("r1", nil)
			require.NoError(t, err)
			require.NoError(t, r.Send(ctx, client.Frame{PCM: tone(1)[0]}))
			at := <-dropped

			// The request's connection is gone and the new session (if
			// any) is not a resumed one: it ends without a terminal.
			_, err = r.Wait(ctx)
			require.ErrorIs(t, err, client.ErrConnectionLost)
			if tt.wantErr != nil {
				<-c.Done()
				require.ErrorIs(t, c.Err(), tt.wantErr)
			} else {
				back := <-connects
				require.GreaterOrEqual(t, back.Sub(at), tt.minWait)
				require.False(t, c.Ready().Resumed)
				_, err := c.Open("r2", nil)
				require.NoError(t, err)
			}
			reqs := f.requests()
			require.Len(t, reqs, tt.wantAttempts)
			for i, q := range tt.wantResumeQ {
				require.Equal(t, q, reqs[i].URL.Query().Get("resume"), "attempt %d", i)
			}
		})
	}
}

// TestDialRefusesAServerWithoutTheSubprotocol: a server that does not
// agree to voiced.v1 is not spoken to.
func TestDialRefusesAServerWithoutTheSubprotocol(t *testing.T) {
	f := newFake(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		ws, err := websocket.Accept(w, r, nil)
		if err == nil {
			_ = ws.CloseNow()
		}
	})
	_, err := client.Dial(testCtx(t), client.Config{URL: f.url()})
	require.ErrorContains(t, err, "did not agree to subprotocol voiced.v1")
}

// TestResumedWithoutTheTerminal: the instance that ran a request is
// killed after its final frame, and the resumed session has no terminal
// for it (lost with the instance): the request ends with
// ErrConnectionLost once its deadline and the grace have passed, and
// its place among the waiting requests is free again.
func TestResumedWithoutTheTerminal(t *testing.T) {
	ctx := testCtx(t)
	f := newFake(t, nil)
	f.handle = func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 0 {
			s := accept(t, w, r, map[string]any{"instance": "a", "conversationId": "conv-1", "resumeToken": "tok-1"})
			s.serve(func(h protocol.AudioHeader) bool { return !h.Final }) // killed
			return
		}
		accept(t, w, r, map[string]any{"instance": "b", "conversationId": "conv-1", "resumeToken": "tok-2", "resumed": true}).serve(nil)
	}
	connects := make(chan client.SessionReady, 4)
	const grace = 100 * time.Millisecond
	c, err := client.Dial(ctx, client.Config{URL: f.url(), MaxWaiting: 1,
		OnConnect: func(r client.SessionReady) { connects <- r },
		Reconnect: client.Reconnect{Initial: 10 * time.Millisecond, Max: 50 * time.Millisecond, TerminalGrace: grace}})
	require.NoError(t, err)
	defer c.Close()
	<-connects
	r1, err := c.Open("r1", nil)
	require.NoError(t, err)
	deadline := c.DeadlineIn(300 * time.Millisecond)
	require.NoError(t, r1.Send(ctx, client.Frame{PCM: tone(1)[0], Final: true, DeadlineAt: deadline}))
	require.True(t, (<-connects).Resumed)

	_, err = r1.Wait(ctx)
	require.ErrorIs(t, err, client.ErrConnectionLost)
	// Less 20 ms: the server clock is read in whole milliseconds, by an
	// offset measured again at the resume.
	require.GreaterOrEqual(t, c.ServerTime(time.Now()), deadline+grace.Milliseconds()-20, "given up before its deadline and the grace (ServerTime: whole ms, offset re-measured at resume)")
	_, err = c.Open("r2", nil)
	require.NoError(t, err, "r1's place is free")
}
