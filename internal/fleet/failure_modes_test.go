package fleet_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/fleet"
	"github.com/voiced/voiced/internal/fleet/redistest"
	"github.com/voiced/voiced/internal/pipeline"
	"github.com/voiced/voiced/internal/protocol"
	"github.com/voiced/voiced/internal/session"
	"github.com/voiced/voiced/internal/stages/llm"
)

// TestResumeTimeoutsLogQuietly: Redis stops answering (frozen) but
// the fleet has not yet declared it lost (three failed checks; Poll is an
// hour here to hold that window open deterministically). Every resume's
// take of the missed terminals then runs out of its budget, and each one
// logs a Warn: one line per resume instead of one for the outage, because
// a call that times out is not reported as session.ErrStoreUnavailable
// (only calls skipped while Redis is lost are).
func TestResumeTimeoutsLogQuietly(t *testing.T) {
	srv := redistest.Start(t)
	in := newInstanceConfig(t, fleet.Config{URL: srv.URL(), Poll: time.Hour, Budget: 20 * time.Millisecond})
	addr, logs, stop := resumeServer(t, fleet.NewConversations(in.r, time.Minute))
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()

	c := dial(t, ctx, addr, "")
	tok := c.ready.ResumeToken
	c.conn.CloseNow()
	srv.Freeze()
	defer srv.Thaw()
	const resumes = 3
	for range resumes {
		c := dial(t, ctx, addr, tok)
		tok = c.ready.ResumeToken
		c.conn.CloseNow()
	}
	stop()
	require.True(t, in.r.Up(), "the window before the loss is declared")
	n := strings.Count(logs.String(), "missed terminals unavailable")
	require.Zero(t, n, "a Warn per resume while Redis does not answer:\n%s", logs.String())
}

// TestSpendDuringOutageCounted: spend an instance records while
// Redis is lost must reach the fleet's totals once Redis is back, and
// must not vanish from this instance's own cap either. Today it is
// dropped (no fallback), and Spent's max(redis, local) then forgets it as
// soon as the fleet's total passes this instance's own.
func TestSpendDuringOutageCounted(t *testing.T) {
	srv := redistest.Start(t)
	cfg := fleet.Config{URL: srv.URL(), Poll: 20 * time.Millisecond, Budget: 50 * time.Millisecond}
	a, b := newInstanceConfig(t, cfg), newInstanceConfig(t, cfg)
	sa, sb := fleet.NewSpend(a.r, 0), fleet.NewSpend(b.r, 0)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	key := llm.SpendKey{Conversation: "c1", Day: "2026-12-01"}

	srv.Freeze()
	require.Eventually(t, func() bool { return !a.r.Up() && !b.r.Up() }, testTimeout, time.Millisecond)
	require.NoError(t, sa.AddSpend(ctx, key, 1.0)) // a's answer during the outage
	srv.Thaw()
	require.Eventually(t, func() bool { return a.r.Up() && b.r.Up() }, testTimeout, time.Millisecond)

	// Another instance's spend after the outage (written straight, so
	// that no budget can skip it).
	raw := redis.NewClient(&redis.Options{Addr: srv.Addr, DisableIdentity: true})
	defer raw.Close()
	require.NoError(t, raw.IncrByFloat(ctx, "voiced:spend:day:"+key.Day, 2.0).Err())

	wait, stop := context.WithTimeout(ctx, 10*time.Second)
	defer stop()
	var da, db float64
	for wait.Err() == nil {
		_, da, _ = sa.Spent(ctx, key)
		_, db, _ = sb.Spent(ctx, key)
		if da == 3.0 && db == 3.0 {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("day total after the outage: a reads %v, b reads %v; spent 3.0 (a's 1.0 during the outage is lost)", da, db)
}

// TestShutdownWithBlackholedRedis: a Redis that accepts and never
// answers (a TCP blackhole) while the instance still takes it for up:
// Run returns within its flush bound, with hundreds of writes queued.
func TestShutdownWithBlackholedRedis(t *testing.T) {
	srv := redistest.Start(t)
	in, stop := runUp(t, fleet.Config{URL: srv.URL(), Budget: 20 * time.Millisecond, Poll: time.Hour})
	conv := fleet.NewConversations(in.r, time.Minute)
	srv.Freeze() // accepts, never answers
	defer srv.Thaw()
	for i := range 500 {
		conv.AddMissed(fmt.Sprintf("c%d", i), []byte("x"))
	}
	tctx, tcancel := context.WithTimeout(context.Background(), time.Second)
	start := time.Now()
	_, _ = conv.TakeMissed(tctx, "c499")
	tcancel()
	require.Less(t, time.Since(start), 600*time.Millisecond, "take bounded by the resume budget")
	start = time.Now()
	stop()
	require.Less(t, time.Since(start), 2*time.Second, "Run held by a blackholed Redis")
	t.Logf("stopped in %v", time.Since(start))
}

// TestBlackholeListener: a listener that accepts and never answers
// from the start: the first check decides within its bound, and Run stops
// at once.
func TestBlackholeListener(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var held []net.Conn
	var mu sync.Mutex
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
		}
	}()
	defer func() {
		ln.Close()
		<-done
		mu.Lock()
		for _, c := range held {
			c.Close()
		}
		mu.Unlock()
	}()
	r, err := fleet.New(fleet.Config{URL: "redis://" + ln.Addr().String() + "/0"}, slog.New(slog.DiscardHandler), nil)
	require.NoError(t, err)
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	start := time.Now()
	wg.Go(func() { r.Run(ctx) })
	select {
	case <-r.Checked():
	case <-time.After(5 * time.Second):
		t.Fatal("first check never decided")
	}
	require.False(t, r.Up())
	require.Less(t, time.Since(start), time.Second)
	start = time.Now()
	stop()
	wg.Wait()
	require.Less(t, time.Since(start), time.Second)
}

// TestRegistryTTL: the entry's TTL in Redis is 3 refresh periods
// (milliseconds, not seconds mixed up).
func TestRegistryTTL(t *testing.T) {
	srv := redistest.Start(t)
	in := newInstance(t, srv.URL())
	fleet.NewRegistry(in.r, "x", "h:1", capacity{}, time.Second)
	raw := redis.NewClient(&redis.Options{Addr: srv.Addr, DisableIdentity: true})
	defer raw.Close()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	require.Eventually(t, func() bool { return raw.Exists(ctx, "voiced:instance:x").Val() == 1 }, testTimeout, time.Millisecond)
	ttl := raw.PTTL(ctx, "voiced:instance:x").Val()
	require.Greater(t, ttl, 2*time.Second)
	require.LessOrEqual(t, ttl, 3*time.Second)
}

// TestRedisFaultIsNotUnavailable: an error Redis itself answers (here a
// key of the wrong type) is a fault to report, not Redis away: only a
// call past its budget or a network failure counts as the store being
// unavailable (which the session server logs at debug level).
func TestRedisFaultIsNotUnavailable(t *testing.T) {
	srv := redistest.Start(t)
	in := newInstanceConfig(t, fleet.Config{URL: srv.URL(), Poll: time.Hour})
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	raw := redis.NewClient(&redis.Options{Addr: srv.Addr, DisableIdentity: true})
	defer raw.Close()
	require.NoError(t, raw.Set(ctx, "voiced:missed:conv-wrongtype", "not a list", 0).Err())
	_, err := fleet.NewConversations(in.r, time.Minute).TakeMissed(ctx, "conv-wrongtype")
	require.Error(t, err)
	require.NotErrorIs(t, err, session.ErrStoreUnavailable)
}

// TestResumeWithRedisHangingReadsFirstMessageAtOnce: Redis stops
// answering and is not yet found lost. A resume's read of the history at
// the upgrade takes its whole budget and fails; the session then went on
// to read the history again and take the missed terminals, a budget each,
// before reading its client's first message, which lost that time from
// its deadline. Now the first message is read at once, and a terminal
// this instance kept (its write to Redis failed) is still replayed.
func TestResumeWithRedisHangingReadsFirstMessageAtOnce(t *testing.T) {
	srv := redistest.Start(t)
	const resumeBudget = 1500 * time.Millisecond
	in := newInstanceConfig(t, fleet.Config{URL: srv.URL(), Poll: time.Hour, Budget: 20 * time.Millisecond, ResumeBudget: resumeBudget})
	conv := fleet.NewConversations(in.r, time.Minute)
	addr, _, _ := resumeServer(t, conv)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()

	c := dial(t, ctx, addr, "")
	c.conn.CloseNow()
	srv.Freeze()
	defer srv.Thaw()
	kept := `{"type":"error","requestId":"r9","code":"cancelled","message":"connection lost"}`
	conv.AddMissed(c.ready.ConversationID, []byte(kept))
	require.Eventually(t, func() bool { return skipped(in, "add_missed") >= 1 }, testTimeout, time.Millisecond, "kept here")

	c2 := dial(t, ctx, addr, c.ready.ResumeToken)
	readyAt := time.Now()
	require.False(t, c2.ready.Resumed)
	require.NoError(t, c2.conn.Write(ctx, websocket.MessageText, []byte(`{"type":"ping","clientTime":1}`)))
	m := c2.next(t, ctx)
	require.Equal(t, "r9", m.RequestID, "the terminal kept here: %s", m.Raw)
	require.Equal(t, protocol.TypePong, c2.next(t, ctx).Type)
	// Two budgets before; one would still be a read of a store away.
	require.Less(t, time.Since(readyAt), resumeBudget, "first message read late")
	require.True(t, in.r.Up(), "the window before the loss is declared")
}

// TestResumeHereWithRedisHangingReadsFirstMessageAtOnce: the case above
// on the instance that holds the conversation (a client whose network
// changed resumes where it was). The read at the upgrade runs out of its
// budget, and the history comes from this instance's copy: the session is
// resumed with it. It then read the history again and took the missed
// terminals from the hanging Redis, a budget each, before reading its
// client's first message. Now it reads them here only, as when the
// history could not be read at all.
func TestResumeHereWithRedisHangingReadsFirstMessageAtOnce(t *testing.T) {
	srv := redistest.Start(t)
	const resumeBudget = 1500 * time.Millisecond
	in := newInstanceConfig(t, fleet.Config{URL: srv.URL(), Poll: time.Hour, Budget: 20 * time.Millisecond, ResumeBudget: resumeBudget})
	conv := fleet.NewConversations(in.r, time.Minute)
	addr, _, _ := resumeServer(t, conv)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()

	c := dial(t, ctx, addr, "")
	c.conn.CloseNow()
	id := c.ready.ConversationID
	history := session.Conversation{Turns: []pipeline.Turn{{User: "where is my order", Assistant: "It ships today."}}, Answered: 1}
	require.NoError(t, conv.Save(ctx, id, history))
	srv.Freeze()
	defer srv.Thaw()
	kept := `{"type":"error","requestId":"r9","code":"cancelled","message":"connection lost"}`
	conv.AddMissed(id, []byte(kept))
	require.Eventually(t, func() bool { return skipped(in, "add_missed") >= 1 }, testTimeout, time.Millisecond, "kept here")

	c2 := dial(t, ctx, addr, c.ready.ResumeToken)
	readyAt := time.Now()
	require.True(t, c2.ready.Resumed, "resumed with this instance's copy")
	require.NoError(t, c2.conn.Write(ctx, websocket.MessageText, []byte(`{"type":"ping","clientTime":1}`)))
	m := c2.next(t, ctx)
	require.Equal(t, "r9", m.RequestID, "the terminal kept here: %s", m.Raw)
	require.Equal(t, protocol.TypePong, c2.next(t, ctx).Type)
	require.Less(t, time.Since(readyAt), resumeBudget, "first message read late")
	require.True(t, in.r.Up(), "the window before the loss is declared")
}
