package fleet

import (
	"cmp"
	"context"
	"encoding/json"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"
)

// Instance is one instance's entry in the registry (GET /v1/cluster).
type Instance struct {
	ID              string `json:"id"`
	Addr            string `json:"addr"`
	Sessions        int    `json:"sessions"`
	FreeRecognizers int    `json:"freeRecognizers"`
	Saturated       bool   `json:"saturated"`
	// Draining: shutting down, refusing new sessions and requests; its
	// sessions are about to resume elsewhere.
	Draining  bool  `json:"draining"`
	UpdatedAt int64 `json:"updatedAt"` // Unix milliseconds
}

// Capacity reports this instance's state for the registry and the agent.
type Capacity interface {
	Sessions() int
	FreeRecognizers() int
	Saturated() bool
	Draining() bool
}

// Describe is the entry of the instance id, reached at addr, with the
// state c reports now.
func Describe(id, addr string, c Capacity) Instance {
	return describe(id, addr, c, time.Now())
}

func describe(id, addr string, c Capacity, now time.Time) Instance {
	return Instance{ID: id, Addr: addr, Sessions: c.Sessions(), FreeRecognizers: c.FreeRecognizers(),
		Saturated: c.Saturated(), Draining: c.Draining(), UpdatedAt: now.UnixMilli()}
}

// Registry publishes this instance's capacity with a short TTL, and lists
// the fleet's live instances.
type Registry struct {
	r     *Redis
	id    string
	addr  string
	cap   Capacity
	every time.Duration
	now   func() time.Time // this instance's clock; tests skew it
}

// registryTTL is how long an entry lives without a refresh, in refresh
// periods: an instance is gone from the listing after missing three.
const registryTTL = 3

// NewRegistry publishes this instance (id, addr) every every, from r's
// Run.
func NewRegistry(r *Redis, id, addr string, cap Capacity, every time.Duration) *Registry {
	g := &Registry{r: r, id: id, addr: addr, cap: cap, every: every, now: time.Now}
	var last time.Time
	r.addPoll(func(ctx context.Context) error {
		if time.Since(last) < every {
			return nil
		}
		last = time.Now()
		return g.publish(ctx)
	})
	return g
}

// Self is this instance's entry now.
func (g *Registry) Self() Instance {
	return describe(g.id, g.addr, g.cap, g.now())
}

func (g *Registry) publish(ctx context.Context) error {
	data, _ := json.Marshal(g.Self())
	return g.r.call(ctx, "register", func(ctx context.Context) error {
		return register.Run(ctx, g.r.client, []string{g.r.key("instance", g.id), g.r.key("instances")},
			data, (registryTTL * g.every).Milliseconds(), g.id).Err()
	})
}

// register: KEYS[1] the instance's entry, KEYS[2] the set of instances;
// ARGV[1] the entry, ARGV[2] its TTL (ms), ARGV[3] the instance's id.
// Writes the entry and indexes it by Redis's clock, which also prunes
// the index: no instance's clock is read against another's.
var register = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
redis.call('ZADD', KEYS[2], string.format('%d', now), ARGV[3])
-- Entries older than a minute are of instances long gone.
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', string.format('%d', now - 60000))
return 0`)

// List returns the live instances, this one first; with Redis away, only
// this one. An instance is live while its entry is in Redis (its TTL,
// which Redis keeps, is three refresh periods); the index holds the last
// minute's instances, and those whose entry expired are left out.
func (g *Registry) List(ctx context.Context) []Instance {
	out := []Instance{g.Self()}
	var ids []string
	err := g.r.call(ctx, "list", func(ctx context.Context) (err error) {
		ids, err = g.r.client.ZRange(ctx, g.r.key("instances"), 0, -1).Result()
		return err
	})
	ids = slices.DeleteFunc(ids, func(id string) bool { return id == g.id })
	if err != nil || len(ids) == 0 {
		return out
	}
	keys := make([]string, len(ids))
	for i, id := range ids {
		keys[i] = g.r.key("instance", id)
	}
	var vals []any
	if g.r.call(ctx, "list", func(ctx context.Context) (err error) {
		vals, err = g.r.client.MGet(ctx, keys...).Result()
		return err
	}) != nil {
		return out
	}
	for _, v := range vals {
		s, ok := v.(string)
		if !ok {
			continue
		}
		var in Instance
		if json.Unmarshal([]byte(s), &in) == nil {
			out = append(out, in)
		}
	}
	slices.SortFunc(out[1:], func(a, b Instance) int { return cmp.Compare(a.ID, b.ID) })
	return out
}
