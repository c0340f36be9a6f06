package fleet

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/voiced/voiced/internal/stages/llm"
)

// Cooldowns is the LLM chain's cooldown store shared through Redis: a
// cooldown one instance starts is written to a hash (provider → end), and
// every instance reads the hash every Poll into a local copy, which is all
// a request ever reads.
type Cooldowns struct {
	r     *Redis
	local *llm.LocalCooldowns

	mu   sync.Mutex
	keys map[string]bool // providers seen in a cooldown; guarded by mu
}

var _ llm.Cooldowns = (*Cooldowns)(nil)

// NewCooldowns returns the shared store, refreshed by r's Run; its gauge
// is registered on reg (when not nil).
func NewCooldowns(r *Redis, reg prometheus.Registerer) *Cooldowns {
	c := &Cooldowns{r: r, local: llm.NewLocalCooldowns(), keys: make(map[string]bool)}
	r.addPoll(c.refresh)
	if reg != nil {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: "voiced", Name: "llm_cooldowns",
			Help: "LLM providers this instance skips now for a cooldown, its own or another instance's.",
		}, c.cooling))
	}
	return c
}

// Until implements llm.Cooldowns from the local copy.
func (c *Cooldowns) Until(key string) time.Time { return c.local.Until(key) }

// Start implements llm.Cooldowns: here at once, in Redis behind.
func (c *Cooldowns) Start(key string, until time.Time, reason string) {
	c.note(key, until)
	if time.Until(until) <= 0 {
		return
	}
	val := until.UnixMilli()
	c.r.enqueue(write{op: "cooldown", do: func(ctx context.Context) error {
		return extendCooldown.Run(ctx, c.r.client, []string{c.r.key("cooldowns")}, key, val).Err()
	}})
	c.r.log.Info("llm provider cooling down", "provider", key, "for", time.Until(until).Round(time.Millisecond), "reason", reason)
}

// note records a cooldown in the local copy.
func (c *Cooldowns) note(key string, until time.Time) {
	c.mu.Lock()
	c.keys[key] = true
	c.mu.Unlock()
	c.local.Start(key, until, "")
}

// refresh reads the fleet's cooldowns, and forgets those that ended.
func (c *Cooldowns) refresh(ctx context.Context) error {
	var all map[string]string
	err := c.r.call(ctx, "cooldowns", func(ctx context.Context) (err error) {
		all, err = c.r.client.HGetAll(ctx, c.r.key("cooldowns")).Result()
		return err
	})
	if err != nil {
		return err
	}
	now := time.Now()
	var ended []any // pairs of a provider and the value read
	for k, v := range all {
		ms, err := strconv.ParseInt(v, 10, 64)
		if err != nil || !now.Before(time.UnixMilli(ms)) {
			ended = append(ended, k, v)
			continue
		}
		c.note(k, time.UnixMilli(ms))
	}
	if len(ended) > 0 {
		c.r.enqueue(write{op: "cooldown", do: func(ctx context.Context) error {
			return forgetCooldowns.Run(ctx, c.r.client, []string{c.r.key("cooldowns")}, ended...).Err()
		}})
	}
	return nil
}

// The hash is written by every instance, so each change is a script,
// atomic in Redis: a cooldown is only ever extended (a 1 s rate limit
// seen by one instance does not cut short the 30 s quota another saw),
// and an ended one is deleted only if no instance started a new one
// since it was read.
var (
	// extendCooldown: KEYS[1] the hash, ARGV[1] the provider, ARGV[2]
	// the end (Unix ms); sets the end unless a later one is there.
	extendCooldown = redis.NewScript(`
local cur = tonumber(redis.call('HGET', KEYS[1], ARGV[1]))
if cur == nil or cur < tonumber(ARGV[2]) then
	redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
end
return 0`)
	// forgetCooldowns: KEYS[1] the hash, ARGV pairs of a provider and
	// the value read; deletes each field that still holds that value.
	forgetCooldowns = redis.NewScript(`
for i = 1, #ARGV, 2 do
	if redis.call('HGET', KEYS[1], ARGV[i]) == ARGV[i + 1] then
		redis.call('HDEL', KEYS[1], ARGV[i])
	end
end
return 0`)
)

// cooling counts the providers in a cooldown now.
func (c *Cooldowns) cooling() float64 {
	c.mu.Lock()
	keys := make([]string, 0, len(c.keys))
	for k := range c.keys {
		keys = append(keys, k)
	}
	c.mu.Unlock()
	n, now := 0, time.Now()
	for _, k := range keys {
		if now.Before(c.local.Until(k)) {
			n++
		}
	}
	return float64(n)
}
