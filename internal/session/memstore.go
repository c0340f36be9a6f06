package session

import (
	"context"
	"slices"
	"sync"
	"time"
)

// MemoryConversations keeps conversations in this process's memory: the
// default store, with which a client resumes on the same instance only.
// Expired entries are dropped as they are met, and by a sweep at most
// once per sweepEvery, so it needs no goroutine. It holds at most
// MaxConversations.
type MemoryConversations struct {
	ttl time.Duration
	max int
	now func() time.Time

	mu        sync.Mutex
	convs     map[string]*memConv // guarded by mu
	lastSweep time.Time           // guarded by mu
}

var _ ConversationStore = (*MemoryConversations)(nil)

type memConv struct {
	conv    Conversation
	saved   bool // conv was saved (an entry may hold only missed terminals)
	expires time.Time
	missed  []missedMsg
}

type missedMsg struct {
	data    []byte
	expires time.Time
}

// sweepEvery is how often, at most, a write scans for expired entries.
const sweepEvery = time.Minute

// MaxConversations is the most conversations a MemoryConversations
// holds. Under steady churn the store holds every conversation of the
// last TTL (sessions opened per minute times the TTL in minutes, about
// 1 KiB each with a few turns), so without a bound a flood of short
// sessions would grow it for as long as the TTL. When it is full, the
// conversations closest to expiring make room, 1% of them at a time.
const MaxConversations = 100_000

// NewMemoryConversations returns an empty store keeping a conversation
// for ttl after it was last saved.
func NewMemoryConversations(ttl time.Duration) *MemoryConversations {
	return &MemoryConversations{ttl: ttl, max: MaxConversations, now: time.Now, convs: make(map[string]*memConv)}
}

// getLocked returns the live entry of id, nil if none; m.mu must be held.
func (m *MemoryConversations) getLocked(id string, now time.Time) *memConv {
	c := m.convs[id]
	if c == nil {
		return nil
	}
	c.missed = slices.DeleteFunc(c.missed, func(x missedMsg) bool { return !now.Before(x.expires) })
	if !now.Before(c.expires) && len(c.missed) == 0 {
		delete(m.convs, id)
		return nil
	}
	return c
}

// entryLocked returns id's entry, made if need be; m.mu must be held.
func (m *MemoryConversations) entryLocked(id string, now time.Time) *memConv {
	m.sweepLocked(now)
	c := m.getLocked(id, now)
	if c == nil {
		if len(m.convs) >= m.max {
			m.makeRoomLocked(now)
		}
		c = &memConv{}
		m.convs[id] = c
	}
	return c
}

// makeRoomLocked drops expired entries, then, if the store is still
// full, the 1% (at least one) closest to expiring; m.mu must be held.
func (m *MemoryConversations) makeRoomLocked(now time.Time) {
	m.lastSweep = time.Time{}
	m.sweepLocked(now)
	if len(m.convs) < m.max {
		return
	}
	type entry struct {
		id      string
		expires time.Time
	}
	all := make([]entry, 0, len(m.convs))
	for id, c := range m.convs {
		exp := c.expires
		for _, x := range c.missed {
			if x.expires.After(exp) {
				exp = x.expires
			}
		}
		all = append(all, entry{id, exp})
	}
	slices.SortFunc(all, func(a, b entry) int { return a.expires.Compare(b.expires) })
	for _, e := range all[:max(len(all)/100, 1)] {
		delete(m.convs, e.id)
	}
}

func (m *MemoryConversations) sweepLocked(now time.Time) {
	if now.Sub(m.lastSweep) < sweepEvery {
		return
	}
	m.lastSweep = now
	for id := range m.convs {
		m.getLocked(id, now)
	}
}

// Load implements ConversationStore.
func (m *MemoryConversations) Load(_ context.Context, id string) (Conversation, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	c := m.getLocked(id, now)
	if c == nil || !c.saved || !now.Before(c.expires) {
		return Conversation{}, false, nil
	}
	return Conversation{Tenant: c.conv.Tenant, Turns: slices.Clone(c.conv.Turns), Answered: c.conv.Answered}, true, nil
}

// Save implements ConversationStore.
func (m *MemoryConversations) Save(_ context.Context, id string, conv Conversation) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	c := m.entryLocked(id, now)
	c.conv = Conversation{Tenant: conv.Tenant, Turns: slices.Clone(conv.Turns), Answered: conv.Answered}
	c.saved = true
	c.expires = now.Add(m.ttl)
	return nil
}

// AddMissed implements ConversationStore.
func (m *MemoryConversations) AddMissed(id string, msg []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	c := m.entryLocked(id, now)
	if len(c.missed) == MaxMissed {
		c.missed = slices.Delete(c.missed, 0, 1)
	}
	c.missed = append(c.missed, missedMsg{data: msg, expires: now.Add(MissedTTL)})
}

// TakeMissed implements ConversationStore.
func (m *MemoryConversations) TakeMissed(_ context.Context, id string) ([][]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := m.getLocked(id, m.now())
	if c == nil || len(c.missed) == 0 {
		return nil, nil
	}
	out := make([][]byte, len(c.missed))
	for i, x := range c.missed {
		out[i] = x.data
	}
	c.missed = nil
	return out, nil
}
