package session

import (
	"container/heap"
	"context"
	"slices"
	"sync"
	"time"
)

// MemoryConversations keeps conversations in this process's memory: the
// default store, with which a client resumes on the same instance only.
// Entries are kept in a heap by the time they expire, so that expired
// ones are dropped, and a full store makes room, in time logarithmic in
// its size under its lock: a store of MaxConversations sorted or swept
// whole on a write held every session's history save (on a result's
// path) for tens of milliseconds. It needs no goroutine.
type MemoryConversations struct {
	ttl time.Duration
	max int
	now func() time.Time

	mu    sync.Mutex
	convs map[string]*memConv // guarded by mu
	byEnd endHeap             // the entries of convs, soonest to expire first; guarded by mu
}

var _ ConversationStore = (*MemoryConversations)(nil)

type memConv struct {
	id      string
	conv    Conversation
	saved   bool // conv was saved (an entry may hold only missed terminals)
	expires time.Time
	missed  []missedMsg
	end     time.Time // when nothing in the entry is live any more: its place in byEnd
	index   int       // in byEnd
}

type missedMsg struct {
	data    []byte
	expires time.Time
}

// MaxConversations is the most conversations a MemoryConversations
// holds. Under steady churn the store holds every conversation of the
// last TTL (sessions opened per minute times the TTL in minutes, about
// 1 KiB each with a few turns), so without a bound a flood of short
// sessions would grow it for as long as the TTL. When it is full, the
// conversation closest to expiring makes room.
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
	n := len(c.missed)
	c.missed = slices.DeleteFunc(c.missed, func(x missedMsg) bool { return !now.Before(x.expires) })
	if !now.Before(c.expires) && len(c.missed) == 0 {
		m.removeLocked(c)
		return nil
	}
	if len(c.missed) < n {
		m.changedLocked(c)
	}
	return c
}

// entryLocked returns id's entry, made if need be; m.mu must be held. The
// caller changes it, then calls changedLocked.
func (m *MemoryConversations) entryLocked(id string, now time.Time) *memConv {
	m.dropExpiredLocked(now)
	if c := m.getLocked(id, now); c != nil {
		return c
	}
	for len(m.convs) >= m.max && len(m.byEnd) > 0 {
		m.removeLocked(m.byEnd[0])
	}
	c := &memConv{id: id}
	m.convs[id] = c
	heap.Push(&m.byEnd, c)
	return c
}

// changedLocked puts c back in its place after its expiries changed; m.mu
// must be held.
func (m *MemoryConversations) changedLocked(c *memConv) {
	c.end = c.expires
	for _, x := range c.missed {
		if x.expires.After(c.end) {
			c.end = x.expires
		}
	}
	heap.Fix(&m.byEnd, c.index)
}

func (m *MemoryConversations) removeLocked(c *memConv) {
	heap.Remove(&m.byEnd, c.index)
	delete(m.convs, c.id)
}

// dropExpiredLocked drops the entries nothing in which is live; m.mu must
// be held.
func (m *MemoryConversations) dropExpiredLocked(now time.Time) {
	for len(m.byEnd) > 0 && !now.Before(m.byEnd[0].end) {
		m.removeLocked(m.byEnd[0])
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
	m.changedLocked(c)
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
	m.changedLocked(c)
}

// TakeMissed implements ConversationStore.
func (m *MemoryConversations) TakeMissed(_ context.Context, id string) ([][]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	c := m.getLocked(id, now)
	if c == nil || len(c.missed) == 0 {
		return nil, nil
	}
	out := make([][]byte, len(c.missed))
	for i, x := range c.missed {
		out[i] = x.data
	}
	c.missed = nil
	if !now.Before(c.expires) {
		m.removeLocked(c) // only the terminals were live
	} else {
		m.changedLocked(c)
	}
	return out, nil
}

// endHeap orders entries by end, soonest first (container/heap).
type endHeap []*memConv

func (h endHeap) Len() int           { return len(h) }
func (h endHeap) Less(i, j int) bool { return h[i].end.Before(h[j].end) }
func (h endHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}

func (h *endHeap) Push(x any) {
	c := x.(*memConv)
	c.index = len(*h)
	*h = append(*h, c)
}

func (h *endHeap) Pop() any {
	old := *h
	c := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return c
}
