package fleet_test

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/fleet"
	"github.com/voiced/voiced/internal/fleet/redistest"
	"github.com/voiced/voiced/internal/pipeline"
	"github.com/voiced/voiced/internal/session"
	"github.com/voiced/voiced/internal/stages/sim"
	"github.com/voiced/voiced/internal/voicedtest"
)

// TestMissedTakenRightAfterAdd: a session that hands its missed terminals
// to the store and then finds a live session of the conversation has that
// session take them at once (session.flushMissed): the take must see
// them although their write to Redis is still queued.
func TestMissedTakenRightAfterAdd(t *testing.T) {
	srv := redistest.Start(t)
	in := newInstance(t, srv.URL())
	conv := fleet.NewConversations(in.r, time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	for i := range 200 {
		id := fmt.Sprintf("c%d", i)
		conv.AddMissed(id, []byte("first"))
		conv.AddMissed(id, []byte("second"))
		got, err := conv.TakeMissed(ctx, id)
		require.NoError(t, err)
		require.Equal(t, [][]byte{[]byte("first"), []byte("second")}, got, "take %d", i)
		got, err = conv.TakeMissed(ctx, id)
		require.NoError(t, err)
		require.Empty(t, got, "each terminal is taken once")
	}
}

// TestHistorySavedDuringOutage: a turn answered while Redis is away is
// saved here only; once Redis is back (with its older copy), this
// instance still loads the newer history, and writes it to Redis for the
// others.
func TestHistorySavedDuringOutage(t *testing.T) {
	srv := redistest.Start(t)
	in := newInstance(t, srv.URL())
	other := newInstance(t, srv.URL())
	conv, otherConv := fleet.NewConversations(in.r, time.Minute), fleet.NewConversations(other.r, time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	t1 := pipeline.Turn{User: "one", Assistant: "1"}
	t2 := pipeline.Turn{User: "two", Assistant: "2"}
	require.NoError(t, conv.Save(ctx, "c", session.Conversation{Tenant: "t", Turns: []pipeline.Turn{t1}}))

	srv.Freeze()
	require.Eventually(t, func() bool { return !in.r.Up() }, testTimeout, time.Millisecond)
	require.ErrorIs(t, conv.Save(ctx, "c", session.Conversation{Tenant: "t", Turns: []pipeline.Turn{t1, t2}}), session.ErrStoreUnavailable)
	srv.Thaw()
	require.Eventually(t, in.r.Up, testTimeout, time.Millisecond)

	got, ok, err := conv.Load(ctx, "c")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, []pipeline.Turn{t1, t2}, got.Turns, "this instance, right after the outage")
	require.Eventually(t, func() bool {
		got, ok, err := otherConv.Load(ctx, "c")
		return err == nil && ok && len(got.Turns) == 2
	}, testTimeout, time.Millisecond, "another instance, once the history is written again")
}

// TestRunStopWritesWhatIsQueued: cmd/voiced stops the fleet right after
// the drain, whose last sessions have just queued their missed terminals
// for a resume elsewhere: Run writes them before it returns.
func TestRunStopWritesWhatIsQueued(t *testing.T) {
	srv := redistest.Start(t)
	r, err := fleet.New(fleet.Config{URL: srv.URL(), Budget: 50 * time.Millisecond}, slog.New(slog.DiscardHandler), prometheus.NewRegistry())
	require.NoError(t, err)
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { r.Run(ctx) })
	require.Eventually(t, r.Up, testTimeout, time.Millisecond)
	conv := fleet.NewConversations(r, time.Minute)
	const n = 300
	for i := range n {
		conv.AddMissed(fmt.Sprintf("c%d", i), []byte("unavailable"))
	}
	stop()
	wg.Wait()
	raw := redis.NewClient(&redis.Options{Addr: srv.Addr, DisableIdentity: true})
	defer raw.Close()
	keys, err := raw.Keys(context.Background(), "voiced:kept:*").Result()
	require.NoError(t, err)
	require.Len(t, keys, n, "missed terminals written before Run returned")
}

// emfileOnce is a listener whose first Accept fails as it does when the
// process is out of descriptors (a connection flood).
type emfileOnce struct {
	net.Listener
	failed bool
}

func (l *emfileOnce) Accept() (net.Conn, error) {
	if !l.failed {
		l.failed = true
		return nil, &net.OpError{Op: "accept", Net: "tcp", Addr: l.Addr(), Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	}
	return l.Listener.Accept()
}

// TestAgentOutlivesAcceptErrors: a failed Accept (EMFILE) does not end
// the agent: HAProxy goes on hearing the instance's state.
func TestAgentOutlivesAcceptErrors(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	agent := fleet.NewAgent(agentState{ready: true, recognizers: 4, capacity: capacity{free: 3}}, slog.New(slog.DiscardHandler))
	done := make(chan error, 1)
	go func() { done <- agent.Serve(ctx, &emfileOnce{Listener: inner}) }()
	defer func() {
		cancel()
		require.NoError(t, <-done)
	}()
	conn, err := net.Dial("tcp", inner.Addr().String())
	require.NoError(t, err)
	defer conn.Close()
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(testTimeout)))
	line, err := bufio.NewReader(conn).ReadString('\n')
	require.NoError(t, err, "an agent that stopped at the failed Accept never answers")
	require.Equal(t, "ready 75%\n", line)
}

// TestResumesDuringOutageLogQuietly: while Redis is away, the outage is
// logged once (by the fleet), not again for every resume that cannot
// read the missed terminals.
func TestResumesDuringOutageLogQuietly(t *testing.T) {
	srv := redistest.Start(t)
	in := newInstance(t, srv.URL())
	addr, logs, stop := resumeServer(t, fleet.NewConversations(in.r, time.Minute))
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()

	c := dial(t, ctx, addr, "")
	tok := c.ready.ResumeToken
	c.conn.CloseNow()
	srv.Stop()
	require.Eventually(t, func() bool { return !in.r.Up() }, testTimeout, time.Millisecond)
	for range 5 {
		c := dial(t, ctx, addr, tok)
		tok = c.ready.ResumeToken
		c.conn.CloseNow()
	}
	stop() // every session has ended, and logged what it logs
	require.NotContains(t, logs.String(), "missed terminals unavailable")
}

// resumeServer serves sessions (sim stages) whose conversations conv
// keeps, logging at info level into logs; stop closes it once every
// session has ended.
func resumeServer(t *testing.T, conv *fleet.Conversations) (addr string, logs *voicedtest.LogBuffer, stop func()) {
	t.Helper()
	logs = &voicedtest.LogBuffer{}
	reg := prometheus.NewRegistry()
	st := sim.New(sim.Config{LLMMedian: time.Millisecond, STTMedian: time.Millisecond, Sigma: -1, SlowShare: -1, FailShare: -1})
	p, err := pipeline.New(pipeline.Config{}, pipeline.Stages{STT: st.STT, Intent: st.Intent, Retrieval: st.Retrieval, LLM: st.LLM}, pipeline.NewMetrics(reg))
	require.NoError(t, err)
	ss := session.NewServer(session.Config{ResumeSecret: []byte("s"), Conversations: conv},
		p, slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo})), session.NewMetrics(reg))
	mux := http.NewServeMux()
	mux.Handle("GET /v1/session", ss)
	hs := httptest.NewServer(mux)
	var once sync.Once
	stop = func() { once.Do(func() { ss.Close(); hs.Close() }) }
	t.Cleanup(stop)
	return strings.TrimPrefix(hs.URL, "http://"), logs, stop
}
