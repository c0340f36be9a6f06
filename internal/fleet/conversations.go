package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/voiced/voiced/internal/session"
)

// Conversations is the session's ConversationStore on Redis, so that a
// client resumes on any instance. This instance's memory is the fallback:
// histories are kept there too, and missed terminals when Redis cannot
// take them, so resume on the same instance works while Redis is away.
type Conversations struct {
	r     *Redis
	ttl   time.Duration
	local *session.MemoryConversations
}

var _ session.ConversationStore = (*Conversations)(nil)

// NewConversations keeps conversations for ttl after their last turn.
func NewConversations(r *Redis, ttl time.Duration) *Conversations {
	return &Conversations{r: r, ttl: ttl, local: session.NewMemoryConversations(ttl)}
}

// Load implements session.ConversationStore: Redis's copy, the newest
// wherever the conversation went, else this instance's. It runs at a
// resume, within Config.ResumeBudget.
func (c *Conversations) Load(ctx context.Context, id string) (session.Conversation, bool, error) {
	var data []byte
	err := c.r.callWithin(ctx, "load", c.r.cfg.ResumeBudget, func(ctx context.Context) (err error) {
		data, err = c.r.client.Get(ctx, c.r.key("conv", id)).Bytes()
		return err
	})
	if err == nil {
		var conv session.Conversation
		if jerr := json.Unmarshal(data, &conv); jerr == nil {
			return conv, true, nil
		}
	}
	conv, ok, lerr := c.local.Load(ctx, id)
	if ok || errors.Is(err, redis.Nil) {
		return conv, ok, lerr
	}
	// Not here, and Redis could not say: the history is unavailable.
	return conv, false, err
}

// Save implements session.ConversationStore: here, then in Redis within
// ctx and the budget, so that any instance knows the turn before its
// result is sent. A write that cannot be made in time is made behind,
// with the newest history this instance holds when its turn comes (so
// it never overwrites a newer one written meanwhile).
func (c *Conversations) Save(ctx context.Context, id string, conv session.Conversation) error {
	c.local.Save(ctx, id, conv)
	err := c.r.call(ctx, "save", func(ctx context.Context) error { return c.set(ctx, id, conv) })
	if err == nil || errors.Is(err, errDown) {
		return err
	}
	c.r.enqueue(write{op: "save_behind", do: func(ctx context.Context) error {
		latest, ok, _ := c.local.Load(ctx, id)
		if !ok {
			return nil
		}
		return c.set(ctx, id, latest)
	}})
	return err
}

// set writes a conversation's history, renewing its expiry.
func (c *Conversations) set(ctx context.Context, id string, conv session.Conversation) error {
	data, err := json.Marshal(conv)
	if err != nil {
		return fmt.Errorf("encode conversation: %w", err)
	}
	return c.r.client.Set(ctx, c.r.key("conv", id), data, c.ttl).Err()
}

// AddMissed implements session.ConversationStore: the last
// session.MaxMissed for session.MissedTTL, in Redis, or here when Redis
// cannot take it.
func (c *Conversations) AddMissed(id string, msg []byte) {
	key := c.r.key("missed", id)
	c.r.enqueue(write{op: "add_missed", do: func(ctx context.Context) error {
		_, err := c.r.client.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.RPush(ctx, key, msg)
			p.LTrim(ctx, key, -session.MaxMissed, -1)
			p.PExpire(ctx, key, session.MissedTTL)
			return nil
		})
		return err
	}, fallback: func() { c.local.AddMissed(id, msg) }})
}

// TakeMissed implements session.ConversationStore: those kept here, then
// those in Redis, read and deleted in one transaction so that only one
// resume gets them, within Config.ResumeBudget.
func (c *Conversations) TakeMissed(ctx context.Context, id string) ([][]byte, error) {
	out, _ := c.local.TakeMissed(ctx, id)
	key := c.r.key("missed", id)
	var lr *redis.StringSliceCmd
	err := c.r.callWithin(ctx, "take_missed", c.r.cfg.ResumeBudget, func(ctx context.Context) error {
		_, err := c.r.client.TxPipelined(ctx, func(p redis.Pipeliner) error {
			lr = p.LRange(ctx, key, 0, -1)
			p.Del(ctx, key)
			return nil
		})
		return err
	})
	if err != nil {
		return out, err
	}
	for _, m := range lr.Val() {
		out = append(out, []byte(m))
	}
	return out, nil
}
