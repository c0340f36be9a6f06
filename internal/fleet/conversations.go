package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
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
	// dirty are the conversations whose newest history may be only here
	// (a save Redis did not take), each with the generation of its last
	// such save. They are written again every Poll while Redis is up,
	// unless Redis's copy has moved on meanwhile (see extends). Guarded
	// by mu.
	dirty map[string]uint64
	gen   uint64 // guarded by mu
	// held are the conversations with missed terminals kept in local (Redis
	// away, or a write failed): they are written to Redis after each check
	// that finds it up (republishMissed), so that a resume on another
	// instance gets them. Guarded by mu.
	held map[string]bool
	now  func() time.Time // this instance's clock, which stamps the terminals it writes; tests skew it
}

var _ session.ConversationStore = (*Conversations)(nil)

// pendingMissed is one conversation's missed terminals on their way to
// Redis.
//
// Each terminal is held stamped with the time it was kept (stamp), here
// as in Redis, and in local while Redis is away: it ages from then
// wherever it goes. Stamped by the write that took it to Redis (until
// 2026-12-07), one kept here through an outage lived about its MissedTTL
// here, then another in Redis.
type pendingMissed struct {
	msgs [][]byte // added, not yet taken by a write, oldest first
	// failed are those a write could not push, older than msgs, until
	// the write's fallback keeps them here (keepMissed).
	failed [][]byte
	// flight, while a write pushes some to Redis, is closed once they
	// are there or in failed.
	flight chan struct{}
}

// maxDirty bounds the conversations remembered as newer here than in
// Redis (a long outage with many conversations); past it, the newest
// saves are not remembered, and a resume on another instance after the
// outage may find their history older.
const maxDirty = session.MaxConversations

// resaveBatch is how many dirty histories one Poll writes again.
const resaveBatch = 16

// errMovedOn ends a write again of a history Redis holds a newer copy of.
var errMovedOn = errors.New("redis holds a newer history")

// NewConversations keeps conversations for ttl after their last turn.
func NewConversations(r *Redis, ttl time.Duration) *Conversations {
	c := &Conversations{
		r: r, ttl: ttl, local: session.NewMemoryConversations(ttl),
		pending: make(map[string]*pendingMissed),
		dirty:   make(map[string]uint64),
		held:    make(map[string]bool),
		now:     time.Now,
	}
	r.addUpkeep(c.resaveDirty)
	r.addUpkeep(c.republishMissed)
	return c
}

// Load implements session.ConversationStore: Redis's copy, the newest
// wherever the conversation went, else this instance's; this instance's
// when it is dirty and extends Redis's (turns answered here that Redis
// did not take). It runs at a resume, within Config.ResumeBudget. When
// Redis did not answer, this instance's copy comes with the error, so
// that the session reads no more of a Redis that may hang.
func (c *Conversations) Load(ctx context.Context, id string) (session.Conversation, bool, error) {
	// Whether this instance holds a newer copy is read before Redis's:
	// a resave that writes it and cleans it between the two would
	// otherwise leave the older copy read from Redis, and no dirty mark.
	gen, dirty := c.dirtyGen(id)
	mine, mineOK, _ := c.local.Load(ctx, id)
	shared, found, err := c.get(ctx, id, c.r.cfg.ResumeBudget)
	if dirty && mineOK {
		if err != nil || !found || mine.Extends(shared) {
			return mine, true, err
		}
		c.clean(id, gen) // the conversation went on elsewhere
	}
	if err == nil && found {
		return shared, true, nil
	}
	// Not in Redis, or Redis could not say (err): this instance's copy,
	// if any.
	conv, ok, _ := c.local.Load(ctx, id)
	return conv, ok, err
}

// get reads Redis's copy of a history within budget; found is false
// when Redis has none (or one that does not decode).
func (c *Conversations) get(ctx context.Context, id string, budget time.Duration) (conv session.Conversation, found bool, err error) {
	var data []byte
	err = c.r.callWithin(ctx, "load", budget, func(ctx context.Context) (err error) {
		data, err = c.r.client.Get(ctx, c.r.key("conv", id)).Bytes()
		return err
	})
	switch {
	case errors.Is(err, redis.Nil):
		return conv, false, nil
	case err != nil:
		return conv, false, err
	}
	return conv, json.Unmarshal(data, &conv) == nil, nil
}

// Save implements session.ConversationStore: here, then in Redis within
// ctx and the budget, so that any instance knows the turn before its
// result is sent. A history Redis did not take is marked dirty, and
// written again behind (resaveDirty).
func (c *Conversations) Save(ctx context.Context, id string, conv session.Conversation) error {
	c.local.Save(ctx, id, conv)
	err := c.r.call(ctx, "save", func(ctx context.Context) error { return c.set(ctx, id, conv) })
	if err == nil {
		c.clean(id, 0)
		return nil
	}
	c.markDirty(id)
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

// markDirty records that id's newest history may be only here.
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

// dirtyGen returns id's dirty generation, if it is dirty.
func (c *Conversations) dirtyGen(id string) (uint64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	g, ok := c.dirty[id]
	return g, ok
}

// resaveDirty writes up to resaveBatch dirty histories again, each
// within the budget; it runs every Poll while Redis is up (so also once
// it returns). A history that cannot be written stays dirty for the next
// Poll, and the batch stops there: it runs on Run's goroutine, and must
// not hold up the next health check by a budget per history.
func (c *Conversations) resaveDirty(ctx context.Context) {
	c.mu.Lock()
	ids := make([]string, 0, min(len(c.dirty), resaveBatch))
	for id := range c.dirty {
		if len(ids) == resaveBatch {
			break
		}
		ids = append(ids, id)
	}
	c.mu.Unlock()
	for _, id := range ids {
		if !c.resave(ctx, id) {
			return
		}
	}
}

// resave writes id's history held here to Redis unless Redis's copy has
// moved on (another instance answered turns since: extends), in one
// optimistic transaction; either way id is clean after, unless saved
// here again meanwhile. It reports false when Redis did not answer.
func (c *Conversations) resave(ctx context.Context, id string) bool {
	gen, ok := c.dirtyGen(id)
	if !ok {
		return true
	}
	mine, ok, _ := c.local.Load(ctx, id)
	if !ok {
		c.clean(id, gen) // expired here: nothing newer to write
		return true
	}
	data, err := json.Marshal(mine)
	if err != nil {
		return true
	}
	key := c.r.key("conv", id)
	err = c.r.call(ctx, "resave", func(ctx context.Context) error {
		err := c.r.client.Watch(ctx, func(tx *redis.Tx) error {
			cur, err := tx.Get(ctx, key).Bytes()
			if err != nil && !errors.Is(err, redis.Nil) {
				return err
			}
			var shared session.Conversation
			if err == nil && json.Unmarshal(cur, &shared) == nil && !mine.Extends(shared) {
				return errMovedOn
			}
			_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
				p.Set(ctx, key, data, c.ttl)
				return nil
			})
			return err
		}, key)
		if errors.Is(err, errMovedOn) {
			return nil // Redis's copy stands: nothing to write
		}
		return err
	})
	if err != nil {
		return false
	}
	c.clean(id, gen)
	return true
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
	p.msgs = append(p.msgs, []byte(stamp(c.now().UnixMilli(), msg)))
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
// write wait in failed for the write's fallback (keepMissed) or a
// resume. Only the writer runs it, so one conversation has one write in
// flight at most.
func (c *Conversations) pushMissed(ctx context.Context, id string) error {
	c.mu.Lock()
	// Those kept here while Redis was away are older than these: they go
	// first, so that Redis's list stays oldest first (TakeMissed puts
	// Redis's before this instance's).
	held, _ := c.local.TakeMissed(ctx, id)
	delete(c.held, id)
	p := c.pending[id]
	if len(held) == 0 && (p == nil || len(p.msgs) == 0) {
		c.mu.Unlock()
		return nil
	}
	if p == nil {
		p = &pendingMissed{}
		c.pending[id] = p
	}
	msgs := slices.Concat(held, p.msgs)
	p.msgs = nil
	flight := make(chan struct{})
	p.flight = flight
	c.mu.Unlock()

	key := c.r.key("kept", id)
	_, err := c.r.client.TxPipelined(ctx, func(pl redis.Pipeliner) error {
		for _, m := range msgs {
			pl.RPush(ctx, key, m) // stamped when kept (AddMissed)
		}
		// The list's expiry is renewed by each write: each entry's own
		// keep time is what TakeMissed ages it by (MissedTTL).
		pl.LTrim(ctx, key, -session.MaxMissed, -1)
		pl.PExpire(ctx, key, session.MissedTTL)
		return nil
	})

	c.mu.Lock()
	if err != nil {
		p.failed = append(p.failed, msgs...)
	}
	p.flight = nil
	more := err == nil && len(p.msgs) > 0
	if len(p.msgs) == 0 && len(p.failed) == 0 {
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
// write queues another for them when it ends. They move under mu, so
// that a resume finds them in one place or the other.
func (c *Conversations) keepMissed(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.pending[id]
	if p != nil && p.flight != nil {
		return
	}
	if p != nil {
		delete(c.pending, id)
		for _, m := range slices.Concat(p.failed, p.msgs) {
			c.local.AddMissed(id, m)
		}
	}
	// Also with nothing pending: the write republishMissed queued for
	// those kept here could not be queued (a full queue), and they must
	// wait for the next upkeep, not stay here for good.
	if len(c.held) < maxDirty {
		c.held[id] = true
	}
}

// republishMissed queues the write of up to resaveBatch conversations'
// missed terminals kept here: it runs after every check that finds Redis
// up. A conversation whose write is queued or in flight already is left
// to it (pushMissed takes those kept here too); one whose write fails is
// kept here again (keepMissed), for the next check.
func (c *Conversations) republishMissed(context.Context) {
	c.mu.Lock()
	var ids []string
	for id := range c.held {
		if len(ids) == resaveBatch {
			break
		}
		delete(c.held, id)
		if p := c.pending[id]; p != nil && (len(p.msgs) > 0 || p.flight != nil) {
			continue
		}
		ids = append(ids, id)
	}
	c.mu.Unlock()
	for _, id := range ids {
		c.queueMissed(id)
	}
}

// TakeMissed implements session.ConversationStore, oldest first: those
// in Redis, those kept here, then those not yet written, the last
// session.MaxMissed of them. A write in
// flight is waited for (within ctx), so that its terminals are found in
// Redis or among those it failed to write.
//
// Redis's are read, and only once read removed (popTaken), within
// Config.ResumeBudget: a read and delete in one call lost them all when
// Redis ran it but answered after the budget. Each goes to the take that
// removed it. A removal that Redis runs without answering in time gives
// all that was read, and one it never runs leaves them for the next
// resume: a duplicate that clients drop (a second terminal for a
// requestId), never a loss they could not mend. A write that timed out
// but ran anyway leaves a terminal both in Redis and here: the same bytes
// are given once.
func (c *Conversations) TakeMissed(ctx context.Context, id string) ([][]byte, error) {
	local, failed, newest, flight := c.takePending(ctx, id)
	if flight != nil {
		select {
		case <-flight:
		case <-ctx.Done():
		}
		l, f, later, _ := c.takePending(ctx, id)
		local = append(local, l...)
		failed = append(failed, f...)
		newest = append(newest, later...)
	}
	var out, stamped [][]byte
	err := c.r.callWithin(ctx, "take_missed", c.r.cfg.ResumeBudget, func(ctx context.Context) error {
		// The list an older build writes, unstamped, whose expiry each
		// write renews; its terminals are older than the stamped ones'.
		// Drop this read once no such build can have run for MissedTTL.
		legacy, err := c.takeList(ctx, c.r.key("missed", id))
		if err != nil {
			return err
		}
		for _, m := range legacy {
			out = append(out, []byte(m))
		}
		kept, err := c.takeList(ctx, c.r.key("kept", id))
		if err != nil {
			return err
		}
		for _, e := range kept {
			stamped = append(stamped, []byte(e))
		}
		return nil
	})
	// Each place keeps up to session.MaxMissed, and across an outage
	// both Redis and this instance hold some: the last MaxMissed, as
	// AddMissed promises, which a resumed session's queue is sized for.
	// Those here are stamped as Redis's are, each aged from its keep time.
	all := dedupe(slices.Concat(out, c.fresh(slices.Concat(stamped, local, failed, newest))))
	return all[max(len(all)-session.MaxMissed, 0):], err
}

// takeList reads the list at key and removes what it read: those this
// take removed are its own; another take that read them too (a resume on
// another instance, a hand-over racing the attach) removed the rest and
// gives them. A removal without an answer gives all it read: a repeat at
// worst, never a loss.
func (c *Conversations) takeList(ctx context.Context, key string) ([]string, error) {
	read, err := c.r.client.LRange(ctx, key, 0, -1).Result()
	if err != nil || len(read) == 0 {
		return nil, err
	}
	args := make([]any, len(read))
	for i, m := range read {
		args[i] = m
	}
	taken, err := popTaken.Run(ctx, c.r.client, []string{key}, args...).StringSlice()
	if err != nil && !errors.Is(err, redis.Nil) {
		c.r.log.Debug("redis: missed terminals read but not removed; a later resume may get them again", "err", err)
		taken = read
	}
	return taken, nil
}

// stamp is the entry of Redis's list for a terminal kept at kept (Unix
// milliseconds, this instance's clock): "kept msg"; this instance holds
// its terminals so too (pendingMissed). The list's expiry cannot age its
// entries, since each write renews it.
func stamp(kept int64, msg []byte) string {
	return strconv.FormatInt(kept, 10) + " " + string(msg)
}

// fresh returns the terminals of entries (made by stamp) kept less than
// session.MissedTTL ago, unstamped, in order.
func (c *Conversations) fresh(entries [][]byte) [][]byte {
	now := c.now()
	out := make([][]byte, 0, len(entries))
	for _, e := range entries {
		if at, m, ok := unstamp(string(e)); ok && now.Before(at.Add(session.MissedTTL)) {
			out = append(out, m)
		}
	}
	return out
}

// unstamp splits an entry made by stamp; ok is false for one that is not.
func unstamp(entry string) (kept time.Time, msg []byte, ok bool) {
	ms, m, ok := strings.Cut(entry, " ")
	n, err := strconv.ParseInt(ms, 10, 64)
	if !ok || err != nil {
		return kept, nil, false
	}
	return time.UnixMilli(n), []byte(m), true
}

// popTaken: KEYS[1] the list, ARGV the terminals a take read, oldest
// first; pops each that is still at the head and returns those it
// popped. A write may have trimmed the oldest meanwhile (LTRIM to
// session.MaxMissed) and appended newer ones, which stay; another take
// may have popped them first.
var popTaken = redis.NewScript(`
local popped = {}
for i = 1, #ARGV do
	if redis.call('LINDEX', KEYS[1], 0) == ARGV[i] then
		popped[#popped + 1] = redis.call('LPOP', KEYS[1])
	end
end
return popped`)

// dedupe drops repeats of the same bytes, keeping the first: a terminal
// written to Redis by a write that timed out, and kept here as well.
// Two terminals of one requestId are never the same bytes unless one
// repeats the other (a client could not tell them apart anyway).
func dedupe(msgs [][]byte) [][]byte {
	seen := make(map[string]bool, len(msgs))
	return slices.DeleteFunc(msgs, func(m []byte) bool {
		if seen[string(m)] {
			return true
		}
		seen[string(m)] = true
		return false
	})
}

// takePending takes id's terminals that are not in Redis: those kept
// here, those a write failed to push, those not yet taken by one, and the
// write in flight, if any.
//
// Those kept here are taken in the same step as the look for a write in
// flight: a write (pushMissed) takes them too, under mu, and then pushes
// them. Taken apart, a write could take them between the look, which
// found none in flight, and the take of those kept here, which found none
// kept: the take's read of Redis could then come before the write
// landed, and the resume missed them.
func (c *Conversations) takePending(ctx context.Context, id string) (local, failed, msgs [][]byte, flight chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	// Kept here because a write failed or Redis was away: newer than
	// what Redis held before (the usual case: one write of a session's
	// terminals landed, the next did not), and the same as failed, which
	// a take that runs before the write's fallback finds.
	local, _ = c.local.TakeMissed(ctx, id)
	p := c.pending[id]
	if p == nil {
		return local, nil, nil, nil
	}
	failed, msgs, flight = p.failed, p.msgs, p.flight
	p.failed, p.msgs = nil, nil
	if flight == nil {
		delete(c.pending, id)
	}
	return local, failed, msgs, flight
}
