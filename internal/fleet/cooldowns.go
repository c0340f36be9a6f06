package fleet

import (
	"context"
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
//
// Only durations cross the wire: an instance sends how long a cooldown
// lasts, and Redis, by its own clock (TIME), stores its end and answers
// how long each one still has to run. Instances' clocks may differ; none
// is read against another's.
type Cooldowns struct {
	r     *Redis
	local *llm.LocalCooldowns

	mu   sync.Mutex
	keys map[string]bool // providers seen in a cooldown; guarded by mu
	// unpublished are the cooldowns started here that Redis has not taken
	// (Redis away, the queue full, the write failed), with their end: they
	// are sent again after each check that finds Redis up, while they last.
	// Guarded by mu.
	unpublished map[string]time.Time

	now func() time.Time // this instance's clock; tests skew it
}

var _ llm.Cooldowns = (*Cooldowns)(nil)

// NewCooldowns returns the shared store, refreshed by r's Run; its gauge
// is registered on reg (when not nil).
func NewCooldowns(r *Redis, reg prometheus.Registerer) *Cooldowns {
	c := &Cooldowns{r: r, local: llm.NewLocalCooldowns(), keys: make(map[string]bool),
		unpublished: make(map[string]time.Time), now: time.Now}
	r.addPoll(c.refresh)
	r.addUpkeep(c.republish)
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

// Start implements llm.Cooldowns: here at once, in Redis behind. One Redis
// does not take is kept, and sent again once Redis answers (republish).
func (c *Cooldowns) Start(key string, until time.Time, reason string) {
	c.note(key, until)
	left := until.Sub(c.now())
	if left <= 0 {
		return
	}
	c.r.enqueue(write{op: "cooldown", do: func(ctx context.Context) error { return c.publish(ctx, key, until) },
		fallback: func() { c.keep(key, until) }})
	c.r.log.Info("llm provider cooling down", "provider", key, "for", left.Round(time.Millisecond), "reason", reason)
}

// publish writes key's cooldown, ending at until by this instance's
// clock, as what is left of it now; one that has ended is not written.
func (c *Cooldowns) publish(ctx context.Context, key string, until time.Time) error {
	left := until.Sub(c.now()).Milliseconds()
	if left <= 0 {
		return nil
	}
	return extendCooldown.Run(ctx, c.r.client, []string{c.r.key("cooldowns")}, key, left).Err()
}

// keep remembers a cooldown Redis did not take.
func (c *Cooldowns) keep(key string, until time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if until.After(c.unpublished[key]) {
		c.unpublished[key] = until
	}
}

// republish sends the cooldowns Redis did not take and that still run,
// each within the budget; it runs after every check that finds Redis up,
// and stops at the first call Redis does not answer.
func (c *Cooldowns) republish(ctx context.Context) {
	c.mu.Lock()
	todo := make(map[string]time.Time, len(c.unpublished))
	now := c.now()
	for k, until := range c.unpublished {
		if !now.Before(until) {
			delete(c.unpublished, k) // over: nothing to tell
			continue
		}
		todo[k] = until
	}
	c.mu.Unlock()
	for k, until := range todo {
		if c.r.call(ctx, "cooldown", func(ctx context.Context) error { return c.publish(ctx, k, until) }) != nil {
			return
		}
		c.mu.Lock()
		if !c.unpublished[k].After(until) { // not extended meanwhile
			delete(c.unpublished, k)
		}
		c.mu.Unlock()
	}
}

// note records a cooldown in the local copy.
func (c *Cooldowns) note(key string, until time.Time) {
	c.mu.Lock()
	c.keys[key] = true
	c.mu.Unlock()
	c.local.Start(key, until, "")
}

// refresh reads the fleet's cooldowns (what is left of each, by Redis's
// clock); Redis forgets those that ended in the same call.
func (c *Cooldowns) refresh(ctx context.Context) error {
	var left []any
	err := c.r.call(ctx, "cooldowns", func(ctx context.Context) (err error) {
		left, err = readCooldowns.Run(ctx, c.r.client, []string{c.r.key("cooldowns")}).Slice()
		return err
	})
	if err != nil {
		return err
	}
	now := c.now()
	for i := 0; i+1 < len(left); i += 2 {
		k, _ := left[i].(string)
		ms, _ := left[i+1].(int64)
		if k == "" || ms <= 0 {
			continue
		}
		c.note(k, now.Add(time.Duration(ms)*time.Millisecond))
	}
	return nil
}

// The hash is written by every instance, so each change is a script,
// atomic in Redis, timed by Redis's clock: a cooldown is only ever
// extended (a 1 s rate limit seen by one instance does not cut short the
// 30 s quota another saw), and an ended one is deleted by the read that
// finds it ended. The values are Unix milliseconds by Redis's clock.
var (
	// extendCooldown: KEYS[1] the hash, ARGV[1] the provider, ARGV[2]
	// how long the cooldown lasts (ms); sets its end unless a later one
	// is there.
	extendCooldown = redis.NewScript(`
local t = redis.call('TIME')
local want = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + tonumber(ARGV[2])
local cur = tonumber(redis.call('HGET', KEYS[1], ARGV[1]))
if cur == nil or cur < want then
	redis.call('HSET', KEYS[1], ARGV[1], string.format('%d', want))
end
return 0`)
	// readCooldowns: KEYS[1] the hash; returns pairs of a provider and
	// the milliseconds its cooldown has left, and deletes those that
	// ended (or do not parse).
	readCooldowns = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local all = redis.call('HGETALL', KEYS[1])
local out = {}
for i = 1, #all, 2 do
	local v = tonumber(all[i + 1])
	if v == nil or v <= now then
		redis.call('HDEL', KEYS[1], all[i])
	else
		out[#out + 1] = all[i]
		out[#out + 1] = v - now
	end
end
return out`)
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
