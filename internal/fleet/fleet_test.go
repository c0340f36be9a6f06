package fleet_test

import (
	"bufio"
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/voiced/voiced/internal/fleet"
	"github.com/voiced/voiced/internal/fleet/redistest"
	"github.com/voiced/voiced/internal/pipeline"
	"github.com/voiced/voiced/internal/protocol"
	"github.com/voiced/voiced/internal/session"
	"github.com/voiced/voiced/internal/stages/llm"
	"github.com/voiced/voiced/internal/stages/sim"
	"github.com/voiced/voiced/internal/voicedtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const testTimeout = 20 * time.Second

// instance is one voiced instance's view of the fleet's Redis.
type instance struct {
	r    *fleet.Redis
	reg  *prometheus.Registry
	logs *voicedtest.LogBuffer
}

// newInstance connects to url and runs the Redis loop until the test
// ends; it returns once Redis is seen up.
func newInstance(t *testing.T, url string) *instance {
	t.Helper()
	// A budget above the 20 ms default: make test runs these tests beside
	// every other package's on two cores.
	return newInstanceConfig(t, fleet.Config{URL: url, Poll: 20 * time.Millisecond, Budget: 50 * time.Millisecond})
}

// newInstanceConfig is newInstance with the configuration given.
func newInstanceConfig(t *testing.T, cfg fleet.Config) *instance {
	t.Helper()
	in, _ := runUp(t, cfg)
	return in
}

// runUp makes a Redis with cfg (and a registry and logs of its own), runs
// it until the test ends or stop (which waits for Run to return) is
// called, and returns it once a check has found Redis up. A test that
// wants no check while it runs sets Poll to an hour; its Redis checks
// once, at the start, within Budget (20-50 ms), which a loaded 2-core
// machine running -race misses now and then: that Redis would stay down
// for the hour, so it is stopped and another made.
func runUp(t *testing.T, cfg fleet.Config) (*instance, func()) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	for ctx.Err() == nil {
		in, stop := startInstance(t, cfg)
		select {
		case <-in.r.Checked():
		case <-ctx.Done():
		}
		if cfg.Poll < time.Minute {
			// Checked again soon: the first check need not find it up.
			require.Eventually(t, in.r.Up, testTimeout, time.Millisecond)
		}
		if in.r.Up() {
			return in, stop
		}
		t.Log("the first check missed its budget: another Redis")
		stop()
	}
	t.Fatalf("Redis not up within %v", testTimeout)
	return nil, nil
}

// startInstance makes a Redis with cfg and runs it until the test ends or
// stop is called.
func startInstance(t *testing.T, cfg fleet.Config) (*instance, func()) {
	t.Helper()
	logs := &voicedtest.LogBuffer{}
	reg := prometheus.NewRegistry()
	r, err := fleet.New(cfg, slog.New(slog.NewTextHandler(logs, nil)), reg)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { r.Run(ctx) })
	stop := sync.OnceFunc(func() {
		cancel()
		wg.Wait()
	})
	t.Cleanup(stop)
	return &instance{r: r, reg: reg, logs: logs}, stop
}

// TestConversationsAcrossInstances: a history saved by one instance is
// loaded by another; missed terminals are kept (the last MaxMissed) and
// taken exactly once, by whichever instance asks first.
func TestConversationsAcrossInstances(t *testing.T) {
	srv := redistest.Start(t)
	a, b := newInstance(t, srv.URL()), newInstance(t, srv.URL())
	ca, cb := fleet.NewConversations(a.r, time.Minute), fleet.NewConversations(b.r, time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()

	conv := session.Conversation{Tenant: "t1", Turns: []pipeline.Turn{{User: "hello", Assistant: "hi"}}}
	require.NoError(t, ca.Save(ctx, "c1", conv))
	got, ok, err := cb.Load(ctx, "c1")
	require.NoError(t, err)
	require.True(t, ok, "instance b sees a's history once Save has returned")
	require.Equal(t, conv, got)

	for i := range session.MaxMissed + 2 {
		ca.AddMissed("c1", []byte{'a' + byte(i)})
	}
	raw := redis.NewClient(&redis.Options{Addr: srv.Addr, DisableIdentity: true})
	defer raw.Close()
	require.Eventually(t, func() bool { // a's writes are behind
		n, err := raw.LLen(ctx, "voiced:kept:c1").Result()
		return err == nil && n == session.MaxMissed && strings.HasSuffix(raw.LIndex(ctx, "voiced:kept:c1", -1).Val(), " "+string(rune('a'+session.MaxMissed+1)))
	}, testTimeout, time.Millisecond)
	missed, err := cb.TakeMissed(ctx, "c1")
	require.NoError(t, err)
	require.Len(t, missed, session.MaxMissed)
	require.Equal(t, []byte{'c'}, missed[0])
	again, err := ca.TakeMissed(ctx, "c1")
	require.NoError(t, err)
	require.Empty(t, again, "taken once")
}

// TestCooldownShared: a cooldown one instance starts is honoured by the
// other after its next refresh.
func TestCooldownShared(t *testing.T) {
	srv := redistest.Start(t)
	a, b := newInstance(t, srv.URL()), newInstance(t, srv.URL())
	ca, cb := fleet.NewCooldowns(a.r, nil), fleet.NewCooldowns(b.r, b.reg)
	key := "openai/gpt-4o-mini"
	require.True(t, cb.Until(key).IsZero())
	until := time.Now().Add(30 * time.Second)
	ca.Start(key, until, "rate_limit")
	require.Eventually(t, func() bool { return cb.Until(key).After(until.Add(-time.Millisecond)) }, testTimeout, time.Millisecond)
	require.Equal(t, 1.0, metric(t, b.reg, "voiced_llm_cooldowns"))
}

// TestRegistry: instances list each other with their capacity.
func TestRegistry(t *testing.T) {
	srv := redistest.Start(t)
	a, b := newInstance(t, srv.URL()), newInstance(t, srv.URL())
	ga := fleet.NewRegistry(a.r, "a", "127.0.0.1:1", capacity{sessions: 3, free: 5}, 50*time.Millisecond)
	fleet.NewRegistry(b.r, "b", "127.0.0.1:2", capacity{sessions: 1, free: 0, saturated: true, draining: true}, 50*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	require.Eventually(t, func() bool { return len(ga.List(ctx)) == 2 }, testTimeout, time.Millisecond)
	list := ga.List(ctx)
	require.Equal(t, "a", list[0].ID)
	require.Equal(t, fleet.Instance{ID: "b", Addr: "127.0.0.1:2", Sessions: 1, FreeRecognizers: 0, Saturated: true, Draining: true, UpdatedAt: list[1].UpdatedAt}, list[1])
	require.Equal(t, 5, list[0].FreeRecognizers)
}

type capacity struct {
	sessions, free      int
	saturated, draining bool
}

func (c capacity) Sessions() int        { return c.sessions }
func (c capacity) FreeRecognizers() int { return c.free }
func (c capacity) Saturated() bool      { return c.saturated }
func (c capacity) Draining() bool       { return c.draining }

// TestRedisLossAndRecovery: with Redis stopped or frozen, calls cost at
// most their budget and fall back to local state; the loss and the
// recovery are logged once each and exported; everything recovers by
// itself when Redis returns.
func TestRedisLossAndRecovery(t *testing.T) {
	srv := redistest.Start(t)
	in := newInstance(t, srv.URL())
	conv := fleet.NewConversations(in.r, time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	up := func() float64 { return metric(t, in.reg, "voiced_redis_up") }
	require.Equal(t, 1.0, up())

	for _, fault := range []struct {
		name       string
		stop, back func()
	}{
		{"killed", srv.Stop, srv.Restart},
		{"frozen", srv.Freeze, srv.Thaw},
	} {
		fault.stop()
		// Whatever the state of the health check, a call costs at most
		// its budget (and some scheduling).
		start := time.Now()
		err := conv.Save(ctx, "nobody", session.Conversation{})
		took := time.Since(start)
		require.Error(t, err, fault.name)
		// (go-redis alone would wait its 5 s read timeout on a frozen
		// server.)
		require.Less(t, took, 500*time.Millisecond, "%s: a call took %v", fault.name, took)
		require.Eventually(t, func() bool { return up() == 0 }, testTimeout, time.Millisecond, fault.name)

		// Local state serves meanwhile: a history saved and missed
		// terminals kept while Redis is away are there for this instance.
		require.Error(t, conv.Save(ctx, "c-"+fault.name, session.Conversation{Tenant: "t"}), "not durable")
		conv.AddMissed("c-"+fault.name, []byte("x"))
		got, ok, err := conv.Load(ctx, "c-"+fault.name)
		require.ErrorIs(t, err, session.ErrStoreUnavailable, "Redis did not answer")
		require.True(t, ok, "this instance's copy")
		require.Equal(t, "t", got.Tenant)
		missed, _ := conv.TakeMissed(ctx, "c-"+fault.name)
		require.Equal(t, [][]byte{[]byte("x")}, missed)

		fault.back()
		require.Eventually(t, func() bool { return up() == 1 }, testTimeout, time.Millisecond, fault.name)
	}
	// Each change is logged once: the log alternates, from reachable at
	// the start (a loaded machine may add a loss and a recovery of its own).
	logs := in.logs.String()
	var states []string
	for line := range strings.SplitSeq(logs, "\n") {
		switch {
		case strings.Contains(line, "redis lost"):
			states = append(states, "lost")
		case strings.Contains(line, "redis reachable"):
			states = append(states, "reachable")
		}
	}
	require.GreaterOrEqual(t, len(states), 5, logs) // the start, two losses, two recoveries
	for i, s := range states {
		require.Equal(t, []string{"reachable", "lost"}[i%2], s, logs)
	}
}

// metric returns the value of the gauge or counter name in reg: of its
// series with the given label pairs (name, value, ...), or of its first.
func metric(t *testing.T, reg *prometheus.Registry, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if !hasLabels(m.GetLabel(), labels) {
				continue
			}
			if c := m.GetCounter(); c != nil {
				return c.GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	t.Fatalf("no metric %s %v", name, labels)
	return 0
}

// hasLabels reports whether ls has every label pair of pairs.
func hasLabels(ls []*dto.LabelPair, pairs []string) bool {
	for i := 0; i+1 < len(pairs); i += 2 {
		if !slices.ContainsFunc(ls, func(l *dto.LabelPair) bool { return l.GetName() == pairs[i] && l.GetValue() == pairs[i+1] }) {
			return false
		}
	}
	return true
}

// agentState is a settable fleet.AgentState.
type agentState struct {
	capacity
	ready, draining, full bool
	recognizers           int
}

func (a agentState) Ready() bool      { return a.ready }
func (a agentState) Draining() bool   { return a.draining }
func (a agentState) Full() bool       { return a.full }
func (a agentState) Recognizers() int { return a.recognizers }

func TestAgentReply(t *testing.T) {
	tests := []struct {
		name string
		st   agentState
		want string
	}{
		{"warming up", agentState{recognizers: 8}, "maint\n"},
		{"idle", agentState{ready: true, recognizers: 8, capacity: capacity{free: 8}}, "ready 100%\n"},
		{"busy", agentState{ready: true, recognizers: 8, capacity: capacity{free: 2}}, "ready 25%\n"},
		{"every recogniser busy", agentState{ready: true, recognizers: 8}, "ready 1%\n"},
		{"saturated", agentState{ready: true, recognizers: 8, capacity: capacity{free: 8, saturated: true}}, "ready 0%\n"},
		{"at -max-sessions", agentState{ready: true, full: true, recognizers: 8, capacity: capacity{free: 8}}, "ready 0%\n"},
		{"draining", agentState{ready: true, draining: true, recognizers: 8, capacity: capacity{free: 8}}, "drain 0%\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, fleet.AgentReply(tt.st))
		})
	}
}

// TestAgentServes: the agent answers each connection with one line and
// closes it, whatever HAProxy sends first (agent-send).
func TestAgentServes(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	agent := fleet.NewAgent(agentState{ready: true, recognizers: 4, capacity: capacity{free: 3}}, slog.New(slog.DiscardHandler))
	done := make(chan error, 1)
	go func() { done <- agent.Serve(ctx, ln) }()
	for range 2 {
		conn, err := net.Dial("tcp", ln.Addr().String())
		require.NoError(t, err)
		conn.Write([]byte("voiced\n"))
		line, err := bufio.NewReader(conn).ReadString('\n')
		require.NoError(t, err)
		require.Equal(t, "ready 75%\n", line)
		conn.Close()
	}
	cancel()
	require.NoError(t, <-done)
}

// BenchmarkRedisCalls measures the Redis calls a session makes off the
// audio path, against a real redis-server on loopback: loading a
// conversation and taking its missed terminals (both at a resume), and
// listing the fleet (GET /v1/cluster).
func BenchmarkRedisCalls(b *testing.B) {
	srv := redistest.Start(b)
	reg := prometheus.NewRegistry()
	r, err := fleet.New(fleet.Config{URL: srv.URL()}, slog.New(slog.DiscardHandler), reg)
	require.NoError(b, err)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { r.Run(ctx) })
	defer func() {
		cancel()
		wg.Wait()
	}()
	require.Eventually(b, r.Up, testTimeout, time.Millisecond)
	conv := fleet.NewConversations(r, time.Minute)
	history := session.Conversation{Tenant: "t", Turns: []pipeline.Turn{
		{User: "where is my order", Assistant: "It ships today."}, {User: "and the refund", Assistant: "Within five days."}}}
	require.NoError(b, conv.Save(ctx, "bench", history))
	reg2 := fleet.NewRegistry(r, "bench", "127.0.0.1:1", capacity{sessions: 1, free: 4}, 50*time.Millisecond)
	require.Eventually(b, func() bool { _, ok, _ := conv.Load(ctx, "bench"); return ok }, testTimeout, time.Millisecond)
	for _, bc := range []struct {
		name string
		call func() error
	}{
		// What each result waits for: its history written.
		{"save", func() error { return conv.Save(ctx, "bench", history) }},
		{"load", func() error { _, _, err := conv.Load(ctx, "bench"); return err }},
		{"take_missed", func() error { _, err := conv.TakeMissed(ctx, "bench"); return err }},
		{"cluster", func() error { reg2.List(ctx); return nil }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				if err := bc.call(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestRedisUnreachableAtStart: an instance whose Redis is not there yet
// says so once, serves on local state, and finds Redis when it comes.
func TestRedisUnreachableAtStart(t *testing.T) {
	if !redistest.Available() {
		t.Skip("redis-server not installed")
	}
	port := redistest.FreePort(t)
	logs := &voicedtest.LogBuffer{}
	reg := prometheus.NewRegistry()
	r, err := fleet.New(fleet.Config{URL: "redis://127.0.0.1:" + strconv.Itoa(port) + "/0", Poll: 10 * time.Millisecond},
		slog.New(slog.NewTextHandler(logs, nil)), reg)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { r.Run(ctx) })
	defer func() {
		cancel()
		wg.Wait()
	}()
	require.Eventually(t, func() bool { return strings.Contains(logs.String(), "redis lost") }, testTimeout, time.Millisecond)
	conv := fleet.NewConversations(r, time.Minute)
	require.Error(t, conv.Save(ctx, "c", session.Conversation{Tenant: "t"}))
	_, ok, err := conv.Load(ctx, "c")
	require.ErrorIs(t, err, session.ErrStoreUnavailable)
	require.True(t, ok, "local state serves")
	require.Equal(t, 0.0, metric(t, reg, "voiced_redis_up"))
	require.Equal(t, 1, strings.Count(logs.String(), "redis lost"), "said once, however many checks failed: %s", logs.String())

	redistest.StartOn(t, port)
	require.Eventually(t, r.Up, testTimeout, time.Millisecond)
	require.Equal(t, 1.0, metric(t, reg, "voiced_redis_up"))
}

// TestResumeOnAnotherInstance: two session servers sharing Redis and a
// secret. A client's connection to the first drops while a request runs
// (its final frame sent) and another still streams; it resumes on the
// second, which replays both terminals, once, from Redis.
func TestResumeOnAnotherInstance(t *testing.T) {
	srv := redistest.Start(t)
	a, b := newInstance(t, srv.URL()), newInstance(t, srv.URL())
	simCfg := sim.Config{LLMMedian: 300 * time.Millisecond, STTMedian: time.Millisecond, Sigma: -1, SlowShare: -1, FailShare: -1}
	secret := []byte("shared secret")
	addrA, _ := voicedtest.StartConfig(t, simCfg, session.Config{ResumeSecret: secret, InstanceID: "a",
		Conversations: fleet.NewConversations(a.r, time.Minute)})
	addrB, _ := voicedtest.StartConfig(t, simCfg, session.Config{ResumeSecret: secret, InstanceID: "b",
		Conversations: fleet.NewConversations(b.r, time.Minute)})
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()

	c := dial(t, ctx, addrA, "")
	require.Equal(t, "a", c.ready.Instance)
	dl := protocol.Millis(time.Now().Add(5 * time.Second))
	send := func(c *websocket.Conn, id string, final bool) {
		frame, err := protocol.EncodeBinaryAudio(nil, protocol.AudioHeader{RequestID: id, DeadlineAt: dl, Final: final}, make([]int16, 320))
		require.NoError(t, err)
		require.NoError(t, c.Write(ctx, websocket.MessageBinary, frame))
	}
	send(c.conn, "done", true)
	send(c.conn, "streaming", false)
	// Both are read once the pong is: then drop.
	require.NoError(t, c.conn.Write(ctx, websocket.MessageText, []byte(`{"type":"ping","clientTime":1}`)))
	for {
		m := c.next(t, ctx)
		if m.Type == protocol.TypePong {
			break
		}
	}
	c.conn.CloseNow()

	raw := redis.NewClient(&redis.Options{Addr: srv.Addr, DisableIdentity: true})
	defer raw.Close()
	require.Eventually(t, func() bool { // the first instance's writes are behind
		return raw.LLen(ctx, "voiced:kept:"+c.ready.ConversationID).Val() == 2
	}, testTimeout, time.Millisecond)

	c2 := dial(t, ctx, addrB, c.ready.ResumeToken)
	require.Equal(t, "b", c2.ready.Instance)
	require.Equal(t, c.ready.ConversationID, c2.ready.ConversationID)
	got := map[string]protocol.ServerMessage{}
	for len(got) < 2 {
		m := c2.next(t, ctx)
		require.True(t, protocol.Terminal(m.Type), "%s", m.Raw)
		got[m.RequestID] = m
	}
	require.Equal(t, protocol.TypeResult, got["done"].Type, "%s", got["done"].Raw)
	var lost protocol.ErrorMessage
	require.NoError(t, got["streaming"].As(&lost))
	require.Equal(t, protocol.CodeCancelled, lost.Code)
	require.Equal(t, "connection lost", lost.Message)
	// Nothing more: the next message is the pong.
	require.NoError(t, c2.conn.Write(ctx, websocket.MessageText, []byte(`{"type":"ping","clientTime":2}`)))
	require.Equal(t, protocol.TypePong, c2.next(t, ctx).Type)
	require.Zero(t, raw.Exists(ctx, "voiced:kept:"+c.ready.ConversationID).Val(), "taken")
}

type wsClient struct {
	conn  *websocket.Conn
	ready protocol.SessionReady
}

func dial(t testing.TB, ctx context.Context, addr, tok string) *wsClient {
	t.Helper()
	u := "ws://" + addr + "/v1/session"
	if tok != "" {
		u += "?resume=" + tok
	}
	conn, _, err := websocket.Dial(ctx, u, nil)
	require.NoError(t, err)
	t.Cleanup(func() { conn.CloseNow() })
	c := &wsClient{conn: conn}
	m := c.next(t, ctx)
	require.Equal(t, protocol.TypeSessionReady, m.Type)
	require.NoError(t, m.As(&c.ready))
	return c
}

func (c *wsClient) next(t testing.TB, ctx context.Context) protocol.ServerMessage {
	t.Helper()
	_, b, err := c.conn.Read(ctx)
	require.NoError(t, err)
	m, err := protocol.DecodeServer(b)
	require.NoError(t, err)
	return m
}

// TestSpendShared: spend added on one instance counts on another; with
// Redis away an instance reads its own.
func TestSpendShared(t *testing.T) {
	srv := redistest.Start(t)
	// What is shared is under test, not the budget: with make test's
	// load on two cores (load 13 at worst) a 50 ms budget skipped a's
	// add, which b then never saw.
	cfg := fleet.Config{URL: srv.URL(), Poll: 20 * time.Millisecond, Budget: 2 * time.Second}
	a, b := newInstanceConfig(t, cfg), newInstanceConfig(t, cfg)
	sa, sb := fleet.NewSpend(a.r, 0), fleet.NewSpend(b.r, 0)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	key := llm.SpendKey{Conversation: "c1", Day: "2026-12-01"}
	require.NoError(t, sa.AddSpend(ctx, key, 0.25))
	require.NoError(t, sb.AddSpend(ctx, llm.SpendKey{Conversation: "c2", Day: key.Day}, 0.5))
	require.Eventually(t, func() bool {
		conv, day, err := sb.Spent(ctx, key)
		return err == nil && conv == 0.25 && day == 0.75
	}, testTimeout, time.Millisecond, "b counts a's spend")

	srv.Stop()
	require.Eventually(t, func() bool { return !a.r.Up() }, testTimeout, time.Millisecond)
	conv, day, err := sa.Spent(ctx, key)
	require.NoError(t, err)
	require.Equal(t, 0.25, conv)
	require.Equal(t, 0.25, day, "its own, while Redis is away")
}

// TestFirstCheck: Checked closes once the first check has decided:
// with Redis up (and Up true by then), unreachable, or frozen (after
// one budget).
func TestFirstCheck(t *testing.T) {
	srv := redistest.Start(t)
	frozen := redistest.Start(t)
	frozen.Freeze()
	t.Cleanup(frozen.Thaw)
	const budget = 300 * time.Millisecond
	for _, tt := range []struct {
		name string
		url  string
		up   bool
	}{
		{"up", srv.URL(), true},
		{"unreachable", "redis://127.0.0.1:" + strconv.Itoa(redistest.FreePort(t)) + "/0", false},
		{"frozen", frozen.URL(), false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r, err := fleet.New(fleet.Config{URL: tt.url, Budget: budget, Poll: time.Hour}, slog.New(slog.DiscardHandler), nil)
			require.NoError(t, err)
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			defer func() {
				cancel()
				wg.Wait()
			}()
			select {
			case <-r.Checked():
				t.Fatal("checked before any check")
			default:
			}
			start := time.Now()
			wg.Go(func() { r.Run(ctx) })
			select {
			case <-r.Checked():
			case <-time.After(testTimeout):
				t.Fatal("the first check never decided")
			}
			took := time.Since(start)
			require.Equal(t, tt.up, r.Up())
			// A dial is allowed max(budget, 100ms), then the ping its budget.
			require.Less(t, took, 2*budget+time.Second, "bounded by the budget")
			t.Logf("first check decided in %v", took)
		})
	}
}

// TestSaveInTimeOrBehind: a save that has no time left is skipped and
// counted, and written behind with the newest history this instance
// holds then.
func TestSaveInTimeOrBehind(t *testing.T) {
	srv := redistest.Start(t)
	// A long budget: Redis must stay up on a busy machine for the write
	// behind to be made (the first save has no time left at all).
	in := newInstanceConfig(t, fleet.Config{URL: srv.URL(), Budget: time.Second, Poll: 20 * time.Millisecond})
	conv := fleet.NewConversations(in.r, time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	raw := redis.NewClient(&redis.Options{Addr: srv.Addr, DisableIdentity: true})
	defer raw.Close()

	one := session.Conversation{Tenant: "t", Turns: []pipeline.Turn{{User: "one", Assistant: "1"}}}
	require.NoError(t, conv.Save(ctx, "c", one))
	require.Contains(t, raw.Get(ctx, "voiced:conv:c").Val(), `"one"`, "written before Save returned")

	gone, stop := context.WithCancel(ctx)
	stop()
	two := session.Conversation{Tenant: "t", Turns: append(one.Turns, pipeline.Turn{User: "two", Assistant: "2"})}
	require.Error(t, conv.Save(gone, "c", two))
	require.Equal(t, 1.0, metric(t, in.reg, "voiced_redis_skipped_total", "op", "save"))
	require.Eventually(t, func() bool {
		return strings.Contains(raw.Get(ctx, "voiced:conv:c").Val(), `"two"`)
	}, testTimeout, time.Millisecond, "written behind")
}

// ask sends one request with the deadline dl and returns its terminal
// message and when it arrived.
func (c *wsClient) ask(t testing.TB, ctx context.Context, id string, dl time.Time) (protocol.ServerMessage, time.Time) {
	t.Helper()
	frame, err := protocol.EncodeBinaryAudio(nil, protocol.AudioHeader{RequestID: id, DeadlineAt: protocol.Millis(dl), Final: true}, make([]int16, 320))
	require.NoError(t, err)
	require.NoError(t, c.conn.Write(ctx, websocket.MessageBinary, frame))
	for {
		m := c.next(t, ctx)
		if m.RequestID == id && protocol.Terminal(m.Type) {
			return m, time.Now()
		}
	}
}

// TestHistoryDurableBeforeResult: the moment a client has a result, the
// turn is in Redis, even with a Redis that answers every command 30 ms
// late (write-behind would lose that race every time).
func TestHistoryDurableBeforeResult(t *testing.T) {
	srv := redistest.Start(t)
	in := newInstanceConfig(t, fleet.Config{URL: srv.Slow(t, 30*time.Millisecond), Budget: 500 * time.Millisecond})
	simCfg := sim.Config{LLMMedian: 5 * time.Millisecond, STTMedian: time.Millisecond, Sigma: -1, SlowShare: -1, FailShare: -1}
	addr, _ := voicedtest.StartConfig(t, simCfg, session.Config{Conversations: fleet.NewConversations(in.r, time.Minute)})
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	raw := redis.NewClient(&redis.Options{Addr: srv.Addr, DisableIdentity: true})
	defer raw.Close()

	c := dial(t, ctx, addr, "")
	for i := range 4 {
		m, _ := c.ask(t, ctx, "t"+strconv.Itoa(i), time.Now().Add(3*time.Second))
		require.Equal(t, protocol.TypeResult, m.Type, "%s", m.Raw)
		var conv session.Conversation
		require.NoError(t, json.Unmarshal([]byte(raw.Get(ctx, "voiced:conv:"+c.ready.ConversationID).Val()), &conv))
		require.Len(t, conv.Turns, i+1, "turn %d in redis when its result arrives", i)
	}
}

// TestResultInTimeWithRedisAway: a Redis that is frozen or stopped while
// still taken for up never holds a result past its deadline: the
// history's write gives up at the deadline less the terminal margin,
// however long -redis.budget is, and is counted. (A margin of 400 ms
// rather than the default 10, for the client's read on a busy machine.)
func TestResultInTimeWithRedisAway(t *testing.T) {
	srv := redistest.Start(t)
	// A budget far beyond the deadline, and no health check meanwhile:
	// only the deadline bounds the write.
	in := newInstanceConfig(t, fleet.Config{URL: srv.URL(), Budget: 5 * time.Second, Poll: time.Hour})
	simCfg := sim.Config{LLMMedian: 5 * time.Millisecond, STTMedian: time.Millisecond, Sigma: -1, SlowShare: -1, FailShare: -1}
	addr, _ := voicedtest.StartConfig(t, simCfg, session.Config{Conversations: fleet.NewConversations(in.r, time.Minute),
		TerminalMargin: 400 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	for i, fault := range []struct {
		name       string
		stop, back func()
	}{
		{"frozen", srv.Freeze, srv.Thaw},
		{"stopped", srv.Stop, srv.Restart},
	} {
		c := dial(t, ctx, addr, "")
		fault.stop()
		dl := time.Now().Add(1500 * time.Millisecond)
		m, at := c.ask(t, ctx, "q", dl)
		fault.back()
		require.Equal(t, protocol.TypeResult, m.Type, "%s: %s", fault.name, m.Raw)
		require.False(t, at.After(dl), "%s: the result came %v after its deadline", fault.name, at.Sub(dl))
		require.True(t, in.r.Up(), "%s: still taken for up", fault.name)
		require.Equal(t, float64(i+1), scrape(t, ctx, addr, "voiced_history_not_durable_total"), fault.name)
		t.Logf("%s: result %v before its deadline", fault.name, dl.Sub(at))
	}
}

// scrape reads one unlabelled metric from a test server's /metrics.
func scrape(t *testing.T, ctx context.Context, addr, name string) float64 {
	t.Helper()
	v, ok := voicedtest.Metric(t, ctx, addr, name)
	require.True(t, ok, "no metric %s", name)
	return v
}

// BenchmarkResultLatency measures what writing the history to Redis
// before each result adds to it: one request after another on one
// session (final frame to result, stages of 1 µs), with the default
// in-memory store and with Redis on loopback.
func BenchmarkResultLatency(b *testing.B) {
	srv := redistest.Start(b)
	r, err := fleet.New(fleet.Config{URL: srv.URL()}, slog.New(slog.DiscardHandler), nil)
	require.NoError(b, err)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	var wg sync.WaitGroup
	wg.Go(func() { r.Run(ctx) })
	defer func() {
		cancel()
		wg.Wait()
	}()
	<-r.Checked()
	require.True(b, r.Up())
	simCfg := sim.Config{STTMedian: time.Microsecond, IntentMedian: time.Microsecond, RetrievalMedian: time.Microsecond,
		LLMMedian: time.Microsecond, LLMPieces: 1, Sigma: -1, SlowShare: -1, FailShare: -1}
	for _, bc := range []struct {
		name  string
		store session.ConversationStore
	}{
		{"memory", session.NewMemoryConversations(time.Minute)},
		{"redis", fleet.NewConversations(r, time.Minute)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			addr, _ := voicedtest.StartConfig(b, simCfg, session.Config{Conversations: bc.store})
			c := dial(b, ctx, addr, "")
			i := 0
			for b.Loop() {
				m, _ := c.ask(b, ctx, "q"+strconv.Itoa(i), time.Now().Add(5*time.Second))
				if m.Type != protocol.TypeResult {
					b.Fatalf("%s", m.Raw)
				}
				i++
			}
		})
	}
}

// TestResumeBudget: the reads of a resume get -redis.resume-budget, not
// the request path's budget: with Redis answering 400 ms late, a history
// is not saved within a 250 ms budget but is loaded, with its missed
// terminals, within a 5 s resume budget. (Budgets this long so that the
// one health check, at the start, passes on a busy machine.)
func TestResumeBudget(t *testing.T) {
	srv := redistest.Start(t)
	proxy := srv.Proxy(t)
	in := newInstanceConfig(t, fleet.Config{URL: "redis://" + proxy.Addr + "/0", Budget: 250 * time.Millisecond, ResumeBudget: 5 * time.Second, Poll: time.Hour})
	conv := fleet.NewConversations(in.r, time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	raw := redis.NewClient(&redis.Options{Addr: srv.Addr, DisableIdentity: true})
	defer raw.Close()
	require.NoError(t, raw.Set(ctx, "voiced:conv:c", `{"tenant":"t","turns":[{"User":"u","Assistant":"a"}]}`, time.Minute).Err())
	require.NoError(t, raw.RPush(ctx, "voiced:missed:c", "m").Err())

	proxy.SetDelay(400 * time.Millisecond)
	require.Error(t, conv.Save(ctx, "other", session.Conversation{Tenant: "t"}), "a 250 ms budget")
	got, ok, err := conv.Load(ctx, "c")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "a", got.Turns[0].Assistant)
	missed, err := conv.TakeMissed(ctx, "c")
	require.NoError(t, err)
	require.Equal(t, [][]byte{[]byte("m")}, missed)
}
