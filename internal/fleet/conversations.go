package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
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

	mu sync.Mutex
	// pending are the missed terminals added and not yet in Redis, by
	// conversation: a resume takes them here (see TakeMissed), since the
	// write that carries them may not have run yet. Guarded by mu.
	pending map[string]*pendingMissed
	// dirty are the conversations whose newest history is only here (a
	// save that Redis did not take), each with the generation of its
	// last such save: Load prefers this instance's copy of them, and
	// they are written again when Redis returns. Guarded by mu.
	dirty map[string]uint64
	gen   uint64 // guarded by mu
}

var _ session.ConversationStore = (*Conversations)(nil)

// pendingMissed is one conversation's missed terminals on their way to
// Redis.
type pendingMissed struct {
	msgs [][]byte // added, not yet taken by a write, oldest first
	// flight, while a write pushes some to Redis, is closed once they
	// are there or back in msgs.
	flight chan struct{}
}

// maxDirty bounds the conversations remembered as newer here than in
// Redis (a long outage with many conversations); past it, the newest
// saves are not remembered, and a resume on another instance after the
// outage may find their history older.
const maxDirty = session.MaxConversations

// resaveBatch is how many histories one write sends again after an
// outage: one round trip, within one call's budget.
const resaveBatch = 64

// NewConversations keeps conversations for ttl after their last turn.
func NewConversations(r *Redis, ttl time.Duration) *Conversations {
	c := &Conversations{
		r: r, ttl: ttl, local: session.NewMemoryConversations(ttl),
		pending: make(map[string]*pendingMissed),
		dirty:   make(map[string]uint64),
	}
	r.addOnUp(c.resaveDirty)
	return c
}

// Load implements session.ConversationStore: Redis's copy, the newest
// wherever the conversation went, else this instance's; this instance's
// when its newest history is only here. It runs at a resume, within
// Config.ResumeBudget.
func (c *Conversations) Load(ctx context.Context, id string) (session.Conversation, bool, error) {
	if c.isDirty(id) {
		if conv, ok, _ := c.local.Load(ctx, id); ok {
			return conv, true, nil
		}
	}
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
// result is sent. A history Redis did not take is marked dirty: written
// behind when the call failed with Redis up, and again once a lost Redis
// returns, each time with the newest history this instance holds.
func (c *Conversations) Save(ctx context.Context, id string, conv session.Conversation) error {
	c.local.Save(ctx, id, conv)
	err := c.r.call(ctx, "save", func(ctx context.Context) error { return c.set(ctx, id, conv) })
	if err == nil {
		c.clean(id, 0)
		return nil
	}
	c.markDirty(id)
	if !errors.Is(err, errDown) {
		c.r.enqueue(write{op: "save_behind", do: func(ctx context.Context) error {
			return c.resave(ctx, []string{id})
		}})
	}
	return err
}

// set writes a conversation's history, renewing its expiry.
func (c *Conversations) set(ctx context.Context, id string, conv session.Conversation) error {
	data, err := c.encode(conv)
	if err != nil {
		return err
	}
	return c.r.client.Set(ctx, c.r.key("conv", id), data, c.ttl).Err()
}

func (c *Conversations) encode(conv session.Conversation) ([]byte, error) {
	data, err := json.Marshal(conv)
	if err != nil {
		return nil, fmt.Errorf("encode conversation: %w", err)
	}
	return data, nil
}

// markDirty records that id's newest history is only here.
func (c *Conversations) markDirty(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.dirty[id]; ok || len(c.dirty) < maxDirty {
		c.gen++
		c.dirty[id] = c.gen
	}
}

// clean forgets that id is dirty, unless it was saved here again after
// generation gen (0: whatever its generation).
func (c *Conversations) clean(id string, gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if g, ok := c.dirty[id]; ok && (gen == 0 || g == gen) {
		delete(c.dirty, id)
	}
}

func (c *Conversations) isDirty(id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.dirty[id]
	return ok
}

// resave writes the newest histories this instance holds of ids in one
// round trip, and forgets those written that were not saved here again
// meanwhile.
func (c *Conversations) resave(ctx context.Context, ids []string) error {
	c.mu.Lock()
	gens := make(map[string]uint64, len(ids))
	for _, id := range ids {
		if g, ok := c.dirty[id]; ok {
			gens[id] = g
		}
	}
	c.mu.Unlock()
	_, err := c.r.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for id := range gens {
			conv, ok, _ := c.local.Load(ctx, id)
			if !ok {
				continue // expired here: nothing newer to write
			}
			data, err := c.encode(conv)
			if err != nil {
				return err
			}
			p.Set(ctx, c.r.key("conv", id), data, c.ttl)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for id, g := range gens {
		c.clean(id, g)
	}
	return nil
}

// resaveDirty queues the writes of the histories saved only here, once
// Redis is found again.
func (c *Conversations) resaveDirty() {
	c.mu.Lock()
	ids := slices.Collect(maps.Keys(c.dirty))
	c.mu.Unlock()
	for batch := range slices.Chunk(ids, resaveBatch) {
		c.r.enqueue(write{op: "resave", do: func(ctx context.Context) error { return c.resave(ctx, batch) }})
	}
}

// AddMissed implements session.ConversationStore: the last
// session.MaxMissed for session.MissedTTL, in Redis, or here when Redis
// cannot take them. They are written behind; until then a resume takes
// them from pending.
func (c *Conversations) AddMissed(id string, msg []byte) {
	c.mu.Lock()
	p := c.pending[id]
	if p == nil {
		p = &pendingMissed{}
		c.pending[id] = p
	}
	queued := len(p.msgs) > 0 // a queued write takes this one too
	p.msgs = append(p.msgs, msg)
	if n := len(p.msgs); n > session.MaxMissed {
		p.msgs = slices.Delete(p.msgs, 0, n-session.MaxMissed)
	}
	c.mu.Unlock()
	if !queued {
		c.queueMissed(id)
	}
}

// queueMissed queues the write of id's pending terminals.
func (c *Conversations) queueMissed(id string) {
	c.r.enqueue(write{op: "add_missed", do: func(ctx context.Context) error { return c.pushMissed(ctx, id) },
		fallback: func() { c.keepMissed(id) }})
}

// pushMissed writes id's pending terminals to Redis. Those it could not
// write go back to pending, for the write's fallback (keepMissed) or a
// resume. Only the writer runs it, so one conversation has one write in
// flight at most.
func (c *Conversations) pushMissed(ctx context.Context, id string) error {
	c.mu.Lock()
	p := c.pending[id]
	if p == nil || len(p.msgs) == 0 {
		c.mu.Unlock()
		return nil
	}
	msgs := p.msgs
	p.msgs = nil
	flight := make(chan struct{})
	p.flight = flight
	c.mu.Unlock()

	key := c.r.key("missed", id)
	_, err := c.r.client.TxPipelined(ctx, func(pl redis.Pipeliner) error {
		for _, m := range msgs {
			pl.RPush(ctx, key, m)
		}
		pl.LTrim(ctx, key, -session.MaxMissed, -1)
		pl.PExpire(ctx, key, session.MissedTTL)
		return nil
	})

	c.mu.Lock()
	if err != nil {
		p.msgs = append(msgs, p.msgs...)
	}
	p.flight = nil
	more := err == nil && len(p.msgs) > 0
	if len(p.msgs) == 0 {
		delete(c.pending, id)
	}
	c.mu.Unlock()
	close(flight)
	if more {
		// Added while this write was in flight, and maybe left here by a
		// fallback that found it in flight (keepMissed): another write.
		c.queueMissed(id)
	}
	return err
}

// keepMissed keeps id's pending terminals here: Redis is away, or did not
// take them. While a write is in flight for id they stay pending: the
// write queues another for them when it ends.
func (c *Conversations) keepMissed(id string) {
	c.mu.Lock()
	p := c.pending[id]
	var msgs [][]byte
	if p != nil && p.flight == nil {
		msgs = p.msgs
		delete(c.pending, id)
	}
	c.mu.Unlock()
	for _, m := range msgs {
		c.local.AddMissed(id, m)
	}
}

// TakeMissed implements session.ConversationStore: those kept here, then
// those in Redis, read and deleted in one transaction so that only one
// resume gets them, within Config.ResumeBudget, then those not yet
// written. A write in flight is waited for (within ctx), so that its
// terminals are found in Redis or back in pending.
func (c *Conversations) TakeMissed(ctx context.Context, id string) ([][]byte, error) {
	newest, flight := c.takePending(id)
	if flight != nil {
		select {
		case <-flight:
		case <-ctx.Done():
		}
		again, _ := c.takePending(id)
		newest = append(again, newest...)
	}
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
	if err == nil {
		for _, m := range lr.Val() {
			out = append(out, []byte(m))
		}
	}
	return append(out, newest...), err
}

// takePending takes id's pending terminals, with the write in flight
// for it, if any.
func (c *Conversations) takePending(id string) ([][]byte, chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.pending[id]
	if p == nil {
		return nil, nil
	}
	msgs, flight := p.msgs, p.flight
	p.msgs = nil
	if flight == nil {
		delete(c.pending, id)
	}
	return msgs, flight
}
