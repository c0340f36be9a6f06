package fleet

import (
	"context"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/voiced/voiced/internal/stages/llm"
)

// Spend is the LLM chain's spend ledger shared through Redis, so that the
// cost caps count a conversation's and a day's spend across the fleet.
// Additions are written behind (INCRBYFLOAT); a read asks Redis within
// the budget and, when Redis cannot answer, this instance's own count.
type Spend struct {
	r     *Redis
	local *llm.MemoryLedger
}

var _ llm.SpendLedger = (*Spend)(nil)

// Totals outlive their last addition by these.
const (
	spendConversationTTL = 24 * time.Hour
	spendDayTTL          = 48 * time.Hour
)

// NewSpend returns the shared ledger.
func NewSpend(r *Redis) *Spend { return &Spend{r: r, local: llm.NewMemoryLedger()} }

// AddSpend implements llm.SpendLedger: here at once, in Redis behind.
func (s *Spend) AddSpend(ctx context.Context, key llm.SpendKey, usd float64) error {
	s.local.AddSpend(ctx, key, usd)
	conv, day := s.keys(key)
	s.r.enqueue(write{op: "spend", do: func(ctx context.Context) error {
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
	}})
	return nil
}

// Spent implements llm.SpendLedger: the fleet's totals, or this
// instance's while Redis cannot say.
func (s *Spend) Spent(ctx context.Context, key llm.SpendKey) (conversation, day float64, err error) {
	conv, dayKey := s.keys(key)
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
	// This instance's latest additions may still be on their way.
	return max(num(vals[0]), lc), max(num(vals[1]), ld), nil
}

func (s *Spend) keys(key llm.SpendKey) (conv, day string) {
	return s.r.key("spend", "conv", key.Conversation), s.r.key("spend", "day", key.Day)
}
