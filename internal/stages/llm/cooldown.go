package llm

import (
	"errors"
	"sync"
	"time"

	"github.com/voiced/voiced/internal/stages/llm/provider"
)

// Cooldowns holds when providers are to be skipped: after a 429 with a
// wait, an exhausted quota or an opened breaker. The default keeps them in
// this process; a shared one (Redis) tells every instance of a fleet, so
// that a provider that asked for a pause gets it from all of them.
type Cooldowns interface {
	// Until returns when key's cooldown ends; zero (or a past time) means
	// none. It is called before every attempt and must not block on the
	// network.
	Until(key string) time.Time
	// Start skips key until until. It must not block either.
	Start(key string, until time.Time, reason string)
}

// LocalCooldowns keeps cooldowns in this process: the default.
type LocalCooldowns struct {
	mu    sync.Mutex
	until map[string]time.Time // guarded by mu
}

var _ Cooldowns = (*LocalCooldowns)(nil)

// NewLocalCooldowns returns an empty store.
func NewLocalCooldowns() *LocalCooldowns {
	return &LocalCooldowns{until: make(map[string]time.Time)}
}

// Until implements Cooldowns.
func (l *LocalCooldowns) Until(key string) time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.until[key]
}

// Start implements Cooldowns; an earlier end never shortens a cooldown.
func (l *LocalCooldowns) Start(key string, until time.Time, _ string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if until.After(l.until[key]) {
		l.until[key] = until
	}
}

// CooldownKey is the key of a provider and model in Cooldowns.
func CooldownKey(provider, model string) string { return provider + "/" + model }

// cooling reports whether s is in a cooldown now.
func (c *Chain) cooling(s *slot) bool {
	return time.Now().Before(c.cooldowns.Until(CooldownKey(s.name, s.model)))
}

// coolDown starts a cooldown of s after a failed attempt that asks for
// one: a rate limit with a wait, or an exhausted quota.
func (c *Chain) coolDown(s *slot, err error) {
	pe, ok := errors.AsType[*provider.Error](err)
	if !ok {
		return
	}
	switch {
	case pe.Kind == provider.KindRateLimit && pe.RetryAfter > 0:
		c.cooldowns.Start(CooldownKey(s.name, s.model), time.Now().Add(pe.RetryAfter), "rate_limit")
	case pe.Kind == provider.KindQuota:
		c.cooldowns.Start(CooldownKey(s.name, s.model), time.Now().Add(c.cfg.BreakerOpen), "quota")
	}
}
