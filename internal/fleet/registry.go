package fleet

import (
	"cmp"
	"context"
	"encoding/json"
	"slices"
	"strconv"
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
	return Instance{ID: id, Addr: addr, Sessions: c.Sessions(), FreeRecognizers: c.FreeRecognizers(),
		Saturated: c.Saturated(), Draining: c.Draining(), UpdatedAt: time.Now().UnixMilli()}
}

// Registry publishes this instance's capacity with a short TTL, and lists
// the fleet's live instances.
type Registry struct {
	r     *Redis
	id    string
	addr  string
	cap   Capacity
	every time.Duration
}

// registryTTL is how long an entry lives without a refresh, in refresh
// periods: an instance is gone from the listing after missing three.
const registryTTL = 3

// NewRegistry publishes this instance (id, addr) every every, from r's
// Run.
func NewRegistry(r *Redis, id, addr string, cap Capacity, every time.Duration) *Registry {
	g := &Registry{r: r, id: id, addr: addr, cap: cap, every: every}
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
	return Describe(g.id, g.addr, g.cap)
}

func (g *Registry) publish(ctx context.Context) error {
	self := g.Self()
	data, _ := json.Marshal(self)
	return g.r.call(ctx, "register", func(ctx context.Context) error {
		_, err := g.r.client.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Set(ctx, g.r.key("instance", g.id), data, registryTTL*g.every)
			p.ZAdd(ctx, g.r.key("instances"), redis.Z{Score: float64(self.UpdatedAt), Member: g.id})
			// Entries older than a minute are of instances long gone.
			p.ZRemRangeByScore(ctx, g.r.key("instances"), "-inf", strconv.FormatInt(self.UpdatedAt-60_000, 10))
			return nil
		})
		return err
	})
}

// List returns the live instances, this one first; with Redis away, only
// this one.
func (g *Registry) List(ctx context.Context) []Instance {
	self := g.Self()
	out := []Instance{self}
	var ids []string
	since := strconv.FormatInt(self.UpdatedAt-(registryTTL*g.every).Milliseconds(), 10)
	err := g.r.call(ctx, "list", func(ctx context.Context) (err error) {
		ids, err = g.r.client.ZRangeArgs(ctx, redis.ZRangeArgs{Key: g.r.key("instances"), ByScore: true, Start: since, Stop: "+inf"}).Result()
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
