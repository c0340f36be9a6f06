package fleet

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

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
	val := strconv.FormatInt(until.UnixMilli(), 10)
	c.r.enqueue(write{op: "cooldown", do: func(ctx context.Context) error {
		return c.r.client.HSet(ctx, c.r.key("cooldowns"), key, val).Err()
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
	var ended []string
	for k, v := range all {
		ms, err := strconv.ParseInt(v, 10, 64)
		if err != nil || !now.Before(time.UnixMilli(ms)) {
			ended = append(ended, k)
			continue
		}
		c.note(k, time.UnixMilli(ms))
	}
	if len(ended) > 0 {
		c.r.enqueue(write{op: "cooldown", do: func(ctx context.Context) error {
			return c.r.client.HDel(ctx, c.r.key("cooldowns"), ended...).Err()
		}})
	}
	return nil
}

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
