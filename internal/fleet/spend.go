package fleet

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/voiced/voiced/internal/stages/llm"
)

// Spend is the LLM chain's spend ledger shared through Redis, so that the
// cost caps count a conversation's and a day's spend across the fleet.
// Additions are written behind (INCRBYFLOAT); a read asks Redis within
// the budget and, when Redis cannot answer, this instance's own count.
// An addition Redis did not take (lost, queue full, a call past its
// budget) is kept here and added again once Redis answers (resend): a
// cap never forgets spend for an outage. One that timed out but ran is
// then counted twice: a cap errs on the side of spending less.
type Spend struct {
	r     *Redis
	local *llm.MemoryLedger

	mu sync.Mutex
	// unsent are the additions Redis has not taken, by conversation and
	// by day. Guarded by mu.
	unsentConv, unsentDay map[string]float64
}

var _ llm.SpendLedger = (*Spend)(nil)

// Totals outlive their last addition by these.
const (
	spendConversationTTL = 24 * time.Hour
	spendDayTTL          = 48 * time.Hour
)

// maxUnsent bounds the conversations whose unsent spend is remembered
// (a long outage); past it only the day's is.
const maxUnsent = 100_000

// NewSpend returns the shared ledger.
func NewSpend(r *Redis) *Spend {
	s := &Spend{r: r, local: llm.NewMemoryLedger(), unsentConv: map[string]float64{}, unsentDay: map[string]float64{}}
	r.addUpkeep(s.resend)
	return s
}

// AddSpend implements llm.SpendLedger: here at once, in Redis behind.
func (s *Spend) AddSpend(ctx context.Context, key llm.SpendKey, usd float64) error {
	s.local.AddSpend(ctx, key, usd)
	s.r.enqueue(write{op: "spend", do: func(ctx context.Context) error { return s.incr(ctx, key, usd) },
		fallback: func() { s.keep(key, usd) }})
	return nil
}

// incr adds usd to key's totals in Redis, renewing their expiry.
func (s *Spend) incr(ctx context.Context, key llm.SpendKey, usd float64) error {
	conv, day := s.keys(key)
	_, err := s.r.client.TxPipelined(ctx, func(p redis.Pipeliner) error {
		if key.Conversation != "" {
			p.IncrByFloat(ctx, conv, usd)
			p.Expire(ctx, conv, spendConversationTTL)
		}
		if key.Day != "" {
			p.IncrByFloat(ctx, day, usd)
			p.Expire(ctx, day, spendDayTTL)
		}
		return nil
	})
	return err
}

// keep remembers an addition Redis did not take.
func (s *Spend) keep(key llm.SpendKey, usd float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
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
// the days' first (the cap all conversations share), then up to
// resendBatch conversations. It runs after every check that finds Redis
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
	for c, v := range s.unsentConv {
		if len(keys) >= len(s.unsentDay)+resendBatch {
			break
		}
		keys, usd = append(keys, llm.SpendKey{Conversation: c}), append(usd, v)
	}
	s.mu.Unlock()
	for i, k := range keys {
		if s.r.call(ctx, "spend", func(ctx context.Context) error { return s.incr(ctx, k, usd[i]) }) != nil {
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
	m, k := s.unsentConv, key.Conversation
	if key.Day != "" {
		m, k = s.unsentDay, key.Day
	}
	if left := m[k] - usd; left > 1e-12 {
		m[k] = left
	} else {
		delete(m, k)
	}
}

// Spent implements llm.SpendLedger: the fleet's totals, or this
// instance's while Redis cannot say.
func (s *Spend) Spent(ctx context.Context, key llm.SpendKey) (conversation, day float64, err error) {
	conv, dayKey := s.keys(key)
	// Unsent is read first: resend takes an addition out only after Redis
	// has it, so each is read at least once (twice if resend runs between).
	s.mu.Lock()
	uc, ud := s.unsentConv[key.Conversation], s.unsentDay[key.Day]
	s.mu.Unlock()
	var vals []any
	if err := s.r.call(ctx, "spent", func(ctx context.Context) (err error) {
		vals, err = s.r.client.MGet(ctx, conv, dayKey).Result()
		return err
	}); err != nil {
		return s.local.Spent(ctx, key)
	}
	num := func(v any) float64 {
		str, _ := v.(string)
		f, _ := strconv.ParseFloat(str, 64)
		return f
	}
	lc, ld, _ := s.local.Spent(ctx, key)
	// This instance's latest additions may still be on their way (queued:
	// its own count covers them), or kept for resend.
	return max(num(vals[0])+uc, lc), max(num(vals[1])+ud, ld), nil
}

func (s *Spend) keys(key llm.SpendKey) (conv, day string) {
	return s.r.key("spend", "conv", key.Conversation), s.r.key("spend", "day", key.Day)
}
