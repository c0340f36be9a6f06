package session

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/protocol"
	"github.com/voiced/voiced/internal/vad"
)

type growthClient struct {
	t    testing.TB
	ctx  context.Context
	conn *websocket.Conn
}

func (c *growthClient) frame(id string, seq int64, final bool, dl time.Time) {
	c.t.Helper()
	b, err := protocol.EncodeBinaryAudio(nil, protocol.AudioHeader{RequestID: id, DeadlineAt: protocol.Millis(dl), Seq: seq, Final: final}, make([]int16, 320))
	require.NoError(c.t, err)
	require.NoError(c.t, c.conn.Write(c.ctx, websocket.MessageBinary, b))
}

func (c *growthClient) text(v any) {
	c.t.Helper()
	b, err := json.Marshal(v)
	require.NoError(c.t, err)
	require.NoError(c.t, c.conn.Write(c.ctx, websocket.MessageText, b))
}

// until reads messages until the terminal one of id.
func (c *growthClient) until(id string) protocol.ServerMessage {
	c.t.Helper()
	for {
		_, b, err := c.conn.Read(c.ctx)
		require.NoError(c.t, err)
		m, err := protocol.DecodeServer(b)
		require.NoError(c.t, err)
		if m.RequestID == id && protocol.Terminal(m.Type) {
			return m
		}
	}
}

func (c *growthClient) pong() {
	c.t.Helper()
	c.text(protocol.Ping{Type: protocol.TypePing, ClientTime: 1})
	for {
		_, b, err := c.conn.Read(c.ctx)
		require.NoError(c.t, err)
		m, err := protocol.DecodeServer(b)
		require.NoError(c.t, err)
		if m.Type == protocol.TypePong {
			return
		}
	}
}

func growthServer(t *testing.T, cfg Config) (*Server, string) {
	srv := NewServer(cfg, drainRunner{answer: true}, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	hs := httptest.NewServer(srv)
	t.Cleanup(func() {
		require.NoError(t, srv.Close())
		hs.Close()
	})
	return srv, "ws" + strings.TrimPrefix(hs.URL, "http")
}

func onlySession(t *testing.T, srv *Server) *Session {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	require.Len(t, srv.sessions, 1)
	for s := range srv.sessions {
		return s
	}
	return nil
}

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// TestOneSessionManyRequestsStaysBounded runs many requests of every
// kind through one long-lived session and checks that nothing the
// session keeps grows with their number.
func TestOneSessionManyRequestsStaysBounded(t *testing.T) {
	n := 20000
	if testing.Short() || raceOn {
		n = 3000
	}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	srv, u := growthServer(t, Config{})
	conn, _, err := websocket.Dial(ctx, u, nil)
	require.NoError(t, err)
	defer conn.CloseNow()
	c := &growthClient{t: t, ctx: ctx, conn: conn}
	_, _, err = conn.Read(ctx) // session.ready
	require.NoError(t, err)

	one := func(i int) {
		id := fmt.Sprintf("req-%d", i)
		far := time.Now().Add(time.Minute)
		switch i % 6 {
		case 0, 1: // answered
			c.frame(id, 0, false, far)
			c.frame(id, 1, true, far)
			require.Equal(t, protocol.TypeResult, c.until(id).Type)
		case 2: // cancelled mid-stream
			c.frame(id, 0, false, far)
			c.text(protocol.Cancel{Type: protocol.TypeCancel, RequestID: id})
			c.until(id)
			c.frame(id, 1, true, far) // a stray frame of an ended request
		case 3: // refused: deadline already passed
			c.frame(id, 0, false, time.Now().Add(-time.Second))
			c.until(id)
			c.frame(id, 1, true, far)
		case 4: // replaced, then answered
			c.frame(id, 0, true, far)
			c.until(id)
			c.frame(id, 0, true, far)
			c.until(id)
		case 5: // a frame of no request, and a playback report for an old one
			c.frame(id, 3, true, far)
			c.text(protocol.Playback{Type: protocol.TypePlayback, RequestID: fmt.Sprintf("req-%d", i-5), PlayedMs: 100})
			c.pong()
		}
	}
	warm := n / 10
	for i := range warm {
		one(i)
	}
	c.pong()
	base := heapInUse()
	goroutines := runtime.NumGoroutine()
	for i := warm; i < n; i++ {
		one(i)
	}
	c.pong()
	// Each request's goroutines end just after its terminal is written.
	require.Eventually(t, func() bool { return runtime.NumGoroutine() <= goroutines+4 }, 10*time.Second, time.Millisecond)
	grown := int64(heapInUse()) - int64(base)

	s := onlySession(t, srv)
	s.mu.Lock()
	tomb, spoken, turns, missed, outCap := len(s.tomb), len(s.spoken), len(s.turns), len(s.missed), cap(s.out)
	s.mu.Unlock()
	require.LessOrEqual(t, tomb, srv.cfg.Tombstones)
	require.LessOrEqual(t, spoken, maxSpoken)
	require.LessOrEqual(t, turns, maxTurns)
	require.Zero(t, missed)
	require.LessOrEqual(t, outCap, srv.cfg.OutboundQueue)
	require.Zero(t, s.reqs.Len())
	store := srv.cfg.Conversations.(*MemoryConversations)
	store.mu.Lock()
	convs := len(store.convs)
	store.mu.Unlock()
	require.Equal(t, 1, convs)
	t.Logf("%d requests: heap grew %d bytes after the warm-up of %d", n-warm, grown, warm)
	// A few bytes a request would be 100s of KiB at this count.
	require.Less(t, grown, int64(256<<10), "heap grew %d bytes over %d requests", grown, n-warm)
}

// periodic is a detector whose every period frames open with speech
// frames of speech.
type periodic struct {
	rate, period, speech, next int
}

func (p *periodic) Process(frame []int16) (bool, error) {
	i := p.next
	p.next++
	return i%p.period < p.speech, nil
}
func (p *periodic) Reset() { p.next = 0 }
func (p *periodic) Close() {}

// TestServerTurnsManyTurnsStayBounded streams audio through one server-turn
// session for many turns.
func TestServerTurnsManyTurnsStayBounded(t *testing.T) {
	turns := 2000
	if testing.Short() || raceOn {
		turns = 300
	}
	const period, speech = 40, 15 // 800 ms a turn: 300 ms speech, 500 ms silence
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	srv, u := growthServer(t, Config{Detector: func(rate int) (vad.Detector, error) {
		return &periodic{rate: rate, period: period, speech: speech}, nil
	}})
	conn, _, err := websocket.Dial(ctx, u, nil)
	require.NoError(t, err)
	defer conn.CloseNow()
	c := &growthClient{t: t, ctx: ctx, conn: conn}
	_, _, err = conn.Read(ctx)
	require.NoError(t, err)
	c.text(map[string]any{"type": "session.update", "turnDetection": map[string]any{"mode": "server", "silenceMs": 200, "minSpeechMs": 100}})
	c.pong()
	// Drain the server's messages meanwhile.
	results := make(chan int, 1)
	terminals := make(chan struct{}, turns+1)
	go func() {
		n := 0
		for {
			_, b, err := conn.Read(ctx)
			if err != nil {
				results <- n
				return
			}
			if m, err := protocol.DecodeServer(b); err == nil && protocol.Terminal(m.Type) {
				terminals <- struct{}{}
				if m.Type == protocol.TypeResult {
					n++
				}
			}
		}
	}()
	// answered waits until every turn sent so far has its terminal.
	received := 0
	answered := func(sent int) {
		for ; received < sent; received++ {
			select {
			case <-terminals:
			case <-ctx.Done():
				t.Fatalf("%d of %d turns answered", received, sent)
			}
		}
	}
	var seq int64
	pcm := make([]byte, 640)
	for i := range pcm {
		pcm[i] = byte(i * 7)
	}
	sent := 0
	send := func(frames int) {
		for i := range frames {
			if i%period == 0 {
				// Paced by the answers, so the outbound queue never fills,
				// and the previous turn is answered before this one's
				// speech starts: sent faster than real time, a turn still
				// being answered when the next speech begins is
				// interrupted (barge-in), as under load about half were.
				answered(sent)
				sent++
			}
			// Server-turn frames carry only a seq.
			b := protocol.EncodeStreamAudio(nil, seq, 0, pcm)
			require.NoError(t, conn.Write(ctx, websocket.MessageBinary, b))
			seq++
		}
	}
	send(period * turns / 10)
	answered(sent)
	base := heapInUse()
	send(period * turns * 9 / 10)
	answered(sent)
	grown := int64(heapInUse()) - int64(base)
	s := onlySession(t, srv)
	s.mu.Lock()
	tomb, spoken, kept := len(s.tomb), len(s.spoken), len(s.turns)
	s.mu.Unlock()
	require.LessOrEqual(t, tomb, srv.cfg.Tombstones)
	require.LessOrEqual(t, spoken, maxSpoken)
	require.LessOrEqual(t, kept, maxTurns)
	conn.Close(websocket.StatusNormalClosure, "")
	n := <-results
	t.Logf("%d turns answered; heap grew %d bytes over %d turns", n, grown, turns*9/10)
	require.Greater(t, n, turns/2)
	require.Less(t, grown, int64(256<<10))
}

// TestManySessionsLeaveNothingBehind opens and closes sessions one after
// another, each with a request in flight at the cut, each resumed once.
func TestManySessionsLeaveNothingBehind(t *testing.T) {
	n := 2000
	if testing.Short() || raceOn {
		n = 300
	}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	srv, u := growthServer(t, Config{})
	store := srv.cfg.Conversations.(*MemoryConversations)
	one := func(i int) {
		conn, _, err := websocket.Dial(ctx, u, nil)
		require.NoError(t, err)
		c := &growthClient{t: t, ctx: ctx, conn: conn}
		_, b, err := conn.Read(ctx)
		require.NoError(t, err)
		var ready protocol.SessionReady
		require.NoError(t, json.Unmarshal(b, &ready))
		far := time.Now().Add(time.Minute)
		c.frame("a", 0, true, far)
		require.Equal(t, protocol.TypeResult, c.until("a").Type)
		c.frame("b", 0, false, far) // still streaming at the cut
		c.pong()
		conn.CloseNow()
		conn, _, err = websocket.Dial(ctx, u+"/?resume="+ready.ResumeToken, nil)
		require.NoError(t, err)
		c.conn = conn
		c.until("b") // connection lost, replayed
		conn.Close(websocket.StatusNormalClosure, "")
	}
	for i := range n / 10 {
		one(i)
	}
	waitNoSessions(t, srv)
	base := heapInUse()
	g := runtime.NumGoroutine()
	for i := n / 10; i < n; i++ {
		one(i)
	}
	waitNoSessions(t, srv)
	grown := int64(heapInUse()) - int64(base)
	srv.mu.Lock()
	live := len(srv.live)
	srv.mu.Unlock()
	require.Zero(t, live, "live sessions by conversation")
	parked := 0
	srv.parker.conns.Range(func(any, any) bool { parked++; return true })
	require.Zero(t, parked)
	require.LessOrEqual(t, runtime.NumGoroutine(), g+4)
	store.mu.Lock()
	convs := len(store.convs)
	withMissed := 0
	for _, c := range store.convs {
		if len(c.missed) > 0 {
			withMissed++
		}
	}
	store.mu.Unlock()
	require.Zero(t, withMissed)
	t.Logf("%d sessions: %d conversations stored (by design, until their TTL); heap grew %d bytes, %d a session",
		n, convs, grown, grown/int64(n*9/10))
}

func waitNoSessions(t *testing.T, srv *Server) {
	require.Eventually(t, func() bool { return srv.Sessions() == 0 }, 10*time.Second, 5*time.Millisecond)
}
