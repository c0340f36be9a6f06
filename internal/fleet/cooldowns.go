package fleet

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/voiced/voiced/internal/stages/llm"
)

// Cooldowns is the LLM chain's cooldown store shared through Redis: a
// cooldown one instance starts is written as a key expiring with it, and
// every instance reads the keys of its providers every Poll into a local
// copy, which is all a request ever reads.
type Cooldowns struct {
	r     *Redis
	local *llm.LocalCooldowns

	mu   sync.Mutex
	keys map[string]bool // provider keys seen, to refresh; guarded by mu
}

var _ llm.Cooldowns = (*Cooldowns)(nil)

// NewCooldowns returns the shared store, refreshed by r's Run.
func NewCooldowns(r *Redis) *Cooldowns {
	c := &Cooldowns{r: r, local: llm.NewLocalCooldowns(), keys: make(map[string]bool)}
	r.addPoll(c.refresh)
	return c
}

// Until implements llm.Cooldowns from the local copy.
func (c *Cooldowns) Until(key string) time.Time {
	c.watch(key)
	return c.local.Until(key)
}

// Start implements llm.Cooldowns: here at once, in Redis behind.
func (c *Cooldowns) Start(key string, until time.Time, reason string) {
	c.watch(key)
	c.local.Start(key, until, reason)
	ttl := time.Until(until)
	if ttl <= 0 {
		return
	}
	val := strconv.FormatInt(until.UnixMilli(), 10)
	c.r.enqueue(write{op: "cooldown", do: func(ctx context.Context) error {
		return c.r.client.Set(ctx, c.r.key("cooldown", key), val, ttl).Err()
	}})
	c.r.log.Info("llm provider cooling down", "provider", key, "for", ttl.Round(time.Millisecond), "reason", reason)
}

func (c *Cooldowns) watch(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.keys[key] = true
}

// refresh reads the watched providers' cooldowns from Redis.
func (c *Cooldowns) refresh(ctx context.Context) error {
	c.mu.Lock()
	names := make([]string, 0, len(c.keys))
	keys := make([]string, 0, len(c.keys))
	for k := range c.keys {
		names = append(names, k)
		keys = append(keys, c.r.key("cooldown", k))
	}
	c.mu.Unlock()
	if len(keys) == 0 {
		return c.r.call(ctx, "ping", func(ctx context.Context) error { return c.r.client.Ping(ctx).Err() })
	}
	var vals []any
	err := c.r.call(ctx, "cooldowns", func(ctx context.Context) (err error) {
		vals, err = c.r.client.MGet(ctx, keys...).Result()
		return err
	})
	if err != nil {
		return err
	}
	for i, v := range vals {
		s, ok := v.(string)
		if !ok {
			continue
		}
		if ms, err := strconv.ParseInt(s, 10, 64); err == nil {
			c.local.Start(names[i], time.UnixMilli(ms), "shared")
		}
	}
	return nil
}
