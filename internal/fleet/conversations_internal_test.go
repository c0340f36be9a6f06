package fleet

import (
	"context"
	"encoding/json"
	"log/slog"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/fleet/redistest"
	"github.com/voiced/voiced/internal/pipeline"
	"github.com/voiced/voiced/internal/session"
)

func turns(names ...string) []pipeline.Turn {
	out := make([]pipeline.Turn, len(names))
	for i, n := range names {
		out[i] = pipeline.Turn{User: n, Assistant: n + "!"}
	}
	return out
}

func TestExtends(t *testing.T) {
	// conv is a copy of tenant t's history: its count of turns answered,
	// then its window.
	conv := func(count int, names ...string) session.Conversation {
		return session.Conversation{Tenant: "t", Turns: turns(names...), Answered: count}
	}
	other := session.Conversation{Tenant: "u", Turns: turns("a", "b"), Answered: 2}
	tests := []struct {
		name         string
		mine, shared session.Conversation
		want         bool
	}{
		{"the same", conv(2, "a", "b"), conv(2, "a", "b"), true},
		{"turns added here", conv(3, "a", "b", "c"), conv(2, "a", "b"), true},
		{"Redis has none", conv(1, "a"), conv(0), true},
		{"the oldest left the window here", conv(4, "b", "c", "d"), conv(3, "a", "b", "c"), true},
		{"slid past Redis's window (a long outage)", conv(8, "e", "f", "g", "h"), conv(4, "a", "b", "c", "d"), true},
		{"a repeated turn, extended here", conv(4, "a", "h", "h", "c"), conv(3, "a", "h", "h"), true},
		{"went on elsewhere", conv(2, "a", "b"), conv(3, "a", "b", "c"), false},
		{"went on elsewhere, ending with a repeat", conv(2, "h", "c"), conv(3, "h", "a", "h"), false},
		{"forked", conv(2, "a", "b2"), conv(3, "a", "b1", "c1"), false},
		{"forked, as many turns", conv(2, "a", "b2"), conv(2, "a", "b1"), false},
		{"a copy from before the count", session.Conversation{Tenant: "t", Turns: turns("a", "b", "c")}, session.Conversation{Tenant: "t", Turns: turns("a", "b")}, true},
		{"another tenant", other, conv(1, "a"), false},
		// An older build's copy has no count: placed by content.
		{"an older build's copy went on elsewhere", conv(11, "8", "9", "10", "11"),
			session.Conversation{Tenant: "t", Turns: turns("9", "10", "x", "y")}, false},
		{"an older build's copy, extended here", conv(11, "8", "9", "10", "11"),
			session.Conversation{Tenant: "t", Turns: turns("7", "8", "9")}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, tt.mine.Extends(tt.shared))
		})
	}
}

// TestDirtyHistoryResolved: a history saved here only (dirty) wins over
// Redis's copy at a load here, and is written again, only while it
// extends Redis's copy; once the conversation went on elsewhere (another
// instance wrote newer turns), Redis's copy wins and is never overwritten.
func TestDirtyHistoryResolved(t *testing.T) {
	srv := redistest.Start(t)
	raw := redis.NewClient(&redis.Options{Addr: srv.Addr, DisableIdentity: true})
	defer raw.Close()
	ctx := context.Background()
	shared := func(names ...string) {
		t.Helper()
		if names == nil {
			require.NoError(t, raw.Del(ctx, "voiced:conv:c").Err())
			return
		}
		data, err := json.Marshal(session.Conversation{Tenant: "t", Turns: turns(names...)})
		require.NoError(t, err)
		require.NoError(t, raw.Set(ctx, "voiced:conv:c", data, time.Minute).Err())
	}
	inRedis := func() []pipeline.Turn {
		t.Helper()
		data, err := raw.Get(ctx, "voiced:conv:c").Bytes()
		require.NoError(t, err)
		var conv session.Conversation
		require.NoError(t, json.Unmarshal(data, &conv))
		return conv.Turns
	}
	tests := []struct {
		name      string
		redis     []string // nil: none
		mine      []string
		load      []string // what a load here gives
		afterSave []string // Redis's copy after the write again
	}{
		{"Redis behind (an outage)", []string{"a"}, []string{"a", "b"}, []string{"a", "b"}, []string{"a", "b"}},
		{"Redis empty", nil, []string{"a", "b"}, []string{"a", "b"}, []string{"a", "b"}},
		{"went on elsewhere", []string{"a", "b", "c"}, []string{"a", "b"}, []string{"a", "b", "c"}, []string{"a", "b", "c"}},
		{"forked in a partition", []string{"a", "b2", "c2"}, []string{"a", "b1"}, []string{"a", "b2", "c2"}, []string{"a", "b2", "c2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, step := range []string{"load", "write again"} {
				r := manual(t, srv)
				c := NewConversations(r, time.Minute)
				shared(tt.redis...)
				c.local.Save(ctx, "c", session.Conversation{Tenant: "t", Turns: turns(tt.mine...)})
				c.markDirty("c")
				if step == "load" {
					got, ok, err := c.Load(ctx, "c")
					require.NoError(t, err)
					require.True(t, ok)
					require.Equal(t, turns(tt.load...), got.Turns)
					continue
				}
				c.resaveDirty(ctx)
				require.Equal(t, turns(tt.afterSave...), inRedis())
				_, dirty := c.dirtyGen("c")
				require.False(t, dirty, "settled either way")
			}
		})
	}
}

// TestTakeMissedOrder: terminals come out oldest first, whatever a write
// in flight does meanwhile: one that failed to push (older than those
// taken while it flew), those added before the take, those added while
// the take waited for the write.
func TestTakeMissedOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, err := New(Config{URL: "redis://127.0.0.1:1/0"}, slog.New(slog.DiscardHandler), nil)
		require.NoError(t, err)
		defer r.client.Close()
		c := NewConversations(r, time.Minute) // Redis away: the take reads no list
		flight := make(chan struct{})
		kept := func(m string) []byte { return []byte(stamp(c.now().UnixMilli(), []byte(m))) } // as AddMissed holds them
		c.pending["c"] = &pendingMissed{msgs: [][]byte{kept("m2")}, flight: flight}            // m1 in flight
		var got [][]byte
		done := make(chan struct{})
		go func() {
			defer close(done)
			got, _ = c.TakeMissed(t.Context(), "c")
		}()
		synctest.Wait() // the take has m2 and waits for the write
		c.mu.Lock()
		p := c.pending["c"]
		p.failed = [][]byte{kept("m1")} // the write failed
		p.msgs = [][]byte{kept("m3")}   // added meanwhile
		p.flight = nil
		c.mu.Unlock()
		close(flight)
		<-done
		require.Equal(t, [][]byte{[]byte("m1"), []byte("m2"), []byte("m3")}, got)
	})
}

// TestDirtyHistorySlidPastRedis: Redis away for more turns than a window
// holds; the history saved here meanwhile shares no turn with Redis's
// copy, and is still the newer one, at a load here and in Redis after.
func TestDirtyHistorySlidPastRedis(t *testing.T) {
	srv := redistest.Start(t)
	raw := redis.NewClient(&redis.Options{Addr: srv.Addr, DisableIdentity: true})
	defer raw.Close()
	ctx := context.Background()
	r := manual(t, srv)
	c := NewConversations(r, time.Minute)
	conv := func(count int, names ...string) session.Conversation {
		return session.Conversation{Tenant: "t", Turns: turns(names...), Answered: count}
	}
	require.NoError(t, c.Save(ctx, "c", conv(4, "a", "b", "c", "d")))
	r.up.Store(false)
	for i, h := range [][]string{{"b", "c", "d", "e"}, {"c", "d", "e", "f"}, {"d", "e", "f", "g"}, {"e", "f", "g", "h"}} {
		require.ErrorIs(t, c.Save(ctx, "c", conv(5+i, h...)), session.ErrStoreUnavailable)
	}
	r.up.Store(true)
	got, ok, err := c.Load(ctx, "c")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, turns("e", "f", "g", "h"), got.Turns, "a resume here")
	c.resaveDirty(ctx)
	data, err := raw.Get(ctx, "voiced:conv:c").Bytes()
	require.NoError(t, err)
	var shared session.Conversation
	require.NoError(t, json.Unmarshal(data, &shared))
	require.Equal(t, conv(8, "e", "f", "g", "h"), shared, "Redis, written again")
}

// TestUpkeepStopsAtASilentRedis: the writes again run on Run's goroutine,
// between health checks: when Redis stops answering, the batch gives up
// at its first unanswered call (one budget) rather than spend a budget
// on every dirty history and delay the next check.
func TestUpkeepStopsAtASilentRedis(t *testing.T) {
	srv := redistest.Start(t)
	r, err := New(Config{URL: srv.URL()}, slog.New(slog.DiscardHandler), nil) // 20 ms budget, 200 ms poll
	require.NoError(t, err)
	defer r.client.Close()
	r.up.Store(true)
	c := NewConversations(r, time.Minute)
	ctx := context.Background()
	for i := range 40 {
		id := "c" + strconv.Itoa(i)
		c.local.Save(ctx, id, session.Conversation{Tenant: "t", Turns: turns("a")})
		c.markDirty(id)
	}
	srv.Freeze()
	defer srv.Thaw()
	start := time.Now()
	c.resaveDirty(ctx)
	require.Less(t, time.Since(start), r.cfg.Poll, "one upkeep")
	c.mu.Lock()
	defer c.mu.Unlock()
	require.Len(t, c.dirty, 40, "nothing was written")
}

// TestPopTakenLeavesNewerTerminals: between a take's read and its
// removal, a write may append newer terminals and trim the oldest (the
// list keeps session.MaxMissed). The removal pops only the terminals
// read that are still at the head: the newer ones stay for the next
// resume, none read is left behind.
func TestPopTakenLeavesNewerTerminals(t *testing.T) {
	srv := redistest.Start(t)
	raw := redis.NewClient(&redis.Options{Addr: srv.Addr, DisableIdentity: true})
	defer raw.Close()
	ctx := t.Context()
	const key = "voiced:kept:c"
	var read []any
	for i := range session.MaxMissed {
		m := "t" + strconv.Itoa(i)
		read = append(read, m)
		require.NoError(t, raw.RPush(ctx, key, m).Err())
	}
	// The write that races the take: one more, trimmed to the newest 16.
	require.NoError(t, raw.RPush(ctx, key, "new").Err())
	require.NoError(t, raw.LTrim(ctx, key, -session.MaxMissed, -1).Err())

	require.NoError(t, popTaken.Run(ctx, raw, []string{key}, read...).Err())
	left, err := raw.LRange(ctx, key, 0, -1).Result()
	require.NoError(t, err)
	require.Equal(t, []string{"new"}, left)
}

func TestDedupe(t *testing.T) {
	b := func(ss ...string) [][]byte {
		out := make([][]byte, len(ss))
		for i, s := range ss {
			out[i] = []byte(s)
		}
		return out
	}
	require.Equal(t, b("a", "b", "c"), dedupe(b("a", "b", "a", "c", "b")))
	require.Empty(t, dedupe(nil))
}
