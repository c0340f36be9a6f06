package fleet

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/voiced/voiced/internal/stages/llm"
)

// Spend is the LLM chain's spend ledger shared through Redis, so that the
// cost caps count a conversation's, a day's and a tenant's day's spend
// across the fleet.
// Additions are written behind (INCRBYFLOAT); a read asks Redis within
// the budget and, when Redis cannot answer, this instance's own count.
// An addition Redis did not take (lost, queue full, a call past its
// budget) is kept here and added again once Redis answers (resend): a
// cap never forgets spend for an outage. One that timed out but ran is
// then counted twice: a cap errs on the side of spending less.
type Spend struct {
	r       *Redis
	local   *llm.MemoryLedger
	convTTL time.Duration // a conversation's total outlives its last addition by this

	mu sync.Mutex
	// unsent are the additions Redis has not taken, by conversation and
	// by day. Guarded by mu.
	unsentConv, unsentDay map[string]float64
	// queued are the additions in the write-behind queue (or being
	// written), by conversation and by day: Redis's totals do not have
	// them yet, and other instances' spend is in those totals. Each moves
	// to unsent if its write fails. Guarded by mu.
	queuedConv, queuedDay map[string]float64
	// unsentTenant and queuedTenant are the same by tenant and day
	// (tenantDay). Guarded by mu.
	unsentTenant, queuedTenant map[string]float64
}

var _ llm.TenantLedger = (*Spend)(nil)

// tenantDay is the key of a tenant's day in the unsent and queued maps
// ("" for a key without a tenant or a day).
func tenantDay(key llm.SpendKey) string {
	if key.Tenant == "" || key.Day == "" {
		return ""
	}
	return key.Day + "\x00" + key.Tenant
}

// splitTenantDay is the key of tenantDay's k.
func splitTenantDay(k string) llm.SpendKey {
	day, tenant, _ := strings.Cut(k, "\x00")
	return llm.SpendKey{Day: day, Tenant: tenant}
}

// spendDayTTL is how long a day's total outlives its last addition.
const spendDayTTL = 48 * time.Hour

// maxUnsent bounds the conversations whose unsent spend is remembered
// (a long outage); past it only the day's is.
const maxUnsent = 100_000

// NewSpend returns the shared ledger. A conversation's total is kept for
// llm.SpendKeep(keep) after its last addition: the longest a
// conversation can be resumed, and at least a day.
func NewSpend(r *Redis, keep time.Duration) *Spend {
	s := &Spend{r: r, local: llm.NewMemoryLedger(keep), convTTL: llm.SpendKeep(keep), unsentConv: map[string]float64{}, unsentDay: map[string]float64{},
		queuedConv: map[string]float64{}, queuedDay: map[string]float64{}, unsentTenant: map[string]float64{}, queuedTenant: map[string]float64{}}
	r.addUpkeep(s.resend)
	return s
}

// AddSpend implements llm.SpendLedger: here at once, in Redis behind.
func (s *Spend) AddSpend(ctx context.Context, key llm.SpendKey, usd float64) error {
	s.local.AddSpend(ctx, key, usd)
	s.mu.Lock()
	addTo(s.queuedConv, key.Conversation, usd)
	addTo(s.queuedDay, key.Day, usd)
	addTo(s.queuedTenant, tenantDay(key), usd)
	s.mu.Unlock()
	s.r.enqueue(write{op: "spend", do: func(ctx context.Context) error {
		err := s.incr(ctx, key, usd, false)
		if err == nil {
			s.mu.Lock()
			subtractFrom(s.queuedConv, key.Conversation, usd)
			subtractFrom(s.queuedDay, key.Day, usd)
			subtractFrom(s.queuedTenant, tenantDay(key), usd)
			s.mu.Unlock()
		}
		return err
	}, fallback: func() { s.keep(key, usd) }})
	return nil
}

// addTo adds usd to m[k], unless k is empty.
func addTo(m map[string]float64, k string, usd float64) {
	if k != "" {
		m[k] += usd
	}
}

// subtractFrom takes usd from m[k], forgetting k once nothing is left.
func subtractFrom(m map[string]float64, k string, usd float64) {
	if k == "" {
		return
	}
	if left := m[k] - usd; left > 1e-12 {
		m[k] = left
	} else {
		delete(m, k)
	}
}

// incr adds usd to key's totals in Redis, renewing their expiry; to the
// day's unless onlyTenant (a resend of a tenant's day, whose key names a
// day too).
func (s *Spend) incr(ctx context.Context, key llm.SpendKey, usd float64, onlyTenant bool) error {
	conv, day, tenant := s.keys(key)
	_, err := s.r.client.TxPipelined(ctx, func(p redis.Pipeliner) error {
		if key.Conversation != "" {
			p.IncrByFloat(ctx, conv, usd)
			p.Expire(ctx, conv, s.convTTL)
		}
		if key.Day != "" && !onlyTenant {
			p.IncrByFloat(ctx, day, usd)
			p.Expire(ctx, day, spendDayTTL)
		}
		if tenantDay(key) != "" {
			p.IncrByFloat(ctx, tenant, usd)
			p.Expire(ctx, tenant, spendDayTTL)
		}
		return nil
	})
	return err
}

// keep remembers a queued addition Redis did not take, for resend.
func (s *Spend) keep(key llm.SpendKey, usd float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	subtractFrom(s.queuedConv, key.Conversation, usd)
	subtractFrom(s.queuedDay, key.Day, usd)
	subtractFrom(s.queuedTenant, tenantDay(key), usd)
	if td := tenantDay(key); td != "" {
		s.unsentTenant[td] += usd // as few as the tenants, like the days
	}
	if key.Conversation != "" {
		if _, ok := s.unsentConv[key.Conversation]; ok || len(s.unsentConv) < maxUnsent {
			s.unsentConv[key.Conversation] += usd
		}
	}
	if key.Day != "" {
		s.unsentDay[key.Day] += usd
	}
}

// resendBatch bounds the conversations one resend sends: it runs on
// Run's goroutine, and must not hold up the next check (see resaveDirty).
const resendBatch = 16

// resend adds the additions Redis did not take, each within the budget:
// the days' first (the cap all conversations share), then the tenants'
// days, then up to resendBatch conversations. It runs after every check that finds Redis
// up, and stops at the first call Redis does not answer (the rest wait
// for the next check). An addition stays in unsent until Redis has taken
// it, so that Spent never reads it in neither place.
func (s *Spend) resend(ctx context.Context) {
	s.mu.Lock()
	var keys []llm.SpendKey
	var usd []float64
	for d, v := range s.unsentDay {
		keys, usd = append(keys, llm.SpendKey{Day: d}), append(usd, v)
	}
	for td, v := range s.unsentTenant {
		keys, usd = append(keys, splitTenantDay(td)), append(usd, v)
	}
	fixed := len(keys)
	for c, v := range s.unsentConv {
		if len(keys) >= fixed+resendBatch {
			break
		}
		keys, usd = append(keys, llm.SpendKey{Conversation: c}), append(usd, v)
	}
	s.mu.Unlock()
	for i, k := range keys {
		if s.r.call(ctx, "spend", func(ctx context.Context) error { return s.incr(ctx, k, usd[i], k.Tenant != "") }) != nil {
			return
		}
		s.sent(k, usd[i])
	}
}

// sent forgets an addition Redis has now taken (keep may have added to
// the same key meanwhile: that stays).
func (s *Spend) sent(key llm.SpendKey, usd float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	subtractFrom(s.unsentConv, key.Conversation, usd)
	if td := tenantDay(key); td != "" {
		subtractFrom(s.unsentTenant, td, usd) // a resent tenant's day only
		return
	}
	subtractFrom(s.unsentDay, key.Day, usd)
}

// Spent implements llm.SpendLedger: the fleet's totals, or this
// instance's while Redis cannot say.
func (s *Spend) Spent(ctx context.Context, key llm.SpendKey) (conversation, day float64, err error) {
	t, err := s.Totals(ctx, key)
	return t.Conversation, t.Day, err
}

// Totals implements llm.TenantLedger: the fleet's totals, read in one
// call within the budget, or this instance's while Redis cannot say.
func (s *Spend) Totals(ctx context.Context, key llm.SpendKey) (llm.SpendTotals, error) {
	conv, dayKey, tenant := s.keys(key)
	// Unsent and queued are read first: an addition leaves them only
	// after Redis has it (or moves from queued to unsent at once), so each
	// is read at least once (twice if its write lands between).
	td := tenantDay(key)
	s.mu.Lock()
	uc := s.unsentConv[key.Conversation] + s.queuedConv[key.Conversation]
	ud := s.unsentDay[key.Day] + s.queuedDay[key.Day]
	ut := s.unsentTenant[td] + s.queuedTenant[td]
	s.mu.Unlock()
	keys := []string{conv, dayKey}
	if td != "" {
		keys = append(keys, tenant)
	}
	var vals []any
	if err := s.r.call(ctx, "spent", func(ctx context.Context) (err error) {
		vals, err = s.r.client.MGet(ctx, keys...).Result()
		return err
	}); err != nil {
		return s.local.Totals(ctx, key)
	}
	num := func(v any) float64 {
		str, _ := v.(string)
		f, _ := strconv.ParseFloat(str, 64)
		return f
	}
	l, _ := s.local.Totals(ctx, key)
	// This instance's own count covers its spend should Redis have lost
	// some (restarted empty).
	t := llm.SpendTotals{Conversation: max(num(vals[0])+uc, l.Conversation), Day: max(num(vals[1])+ud, l.Day)}
	if td != "" {
		t.TenantDay = max(num(vals[2])+ut, l.TenantDay)
	}
	return t, nil
}

// keys are the Redis keys of key's totals: its conversation's, its
// day's and its tenant's day's.
func (s *Spend) keys(key llm.SpendKey) (conv, day, tenant string) {
	return s.r.key("spend", "conv", key.Conversation), s.r.key("spend", "day", key.Day),
		s.r.key("spend", "tenant", key.Tenant, key.Day)
}
