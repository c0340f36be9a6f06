package fleet

import (
	"context"
	"encoding/json"
	"log/slog"
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
	conv := func(tenant string, names ...string) session.Conversation {
		return session.Conversation{Tenant: tenant, Turns: turns(names...)}
	}
	tests := []struct {
		name         string
		mine, shared session.Conversation
		want         bool
	}{
		{"the same", conv("t", "a", "b"), conv("t", "a", "b"), true},
		{"turns added here", conv("t", "a", "b", "c"), conv("t", "a", "b"), true},
		{"Redis has none", conv("t", "a"), conv("t"), true},
		{"the oldest left the window here", conv("t", "b", "c", "d"), conv("t", "a", "b", "c"), true},
		{"went on elsewhere", conv("t", "a", "b"), conv("t", "a", "b", "c"), false},
		{"forked", conv("t", "a", "b2"), conv("t", "a", "b1", "c1"), false},
		{"same newest, different before", conv("t", "x", "b"), conv("t", "a", "b"), false},
		{"another tenant", conv("u", "a", "b"), conv("t", "a"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, extends(tt.mine, tt.shared))
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
		c.pending["c"] = &pendingMissed{msgs: [][]byte{[]byte("m2")}, flight: flight} // m1 in flight
		var got [][]byte
		done := make(chan struct{})
		go func() {
			defer close(done)
			got, _ = c.TakeMissed(t.Context(), "c")
		}()
		synctest.Wait() // the take has m2 and waits for the write
		c.mu.Lock()
		p := c.pending["c"]
		p.failed = [][]byte{[]byte("m1")} // the write failed
		p.msgs = [][]byte{[]byte("m3")}   // added meanwhile
		p.flight = nil
		c.mu.Unlock()
		close(flight)
		<-done
		require.Equal(t, [][]byte{[]byte("m1"), []byte("m2"), []byte("m3")}, got)
	})
}
