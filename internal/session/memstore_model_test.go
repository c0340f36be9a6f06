package session

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/pipeline"
)

// MemoryConversations against a naive model of it, over random
// operations on a small store: the same conversations and terminals come
// back, and a full store forgets the entry whose contents all expire
// first (the model scans every entry; the store keeps a heap).
func TestMemoryConversationsAgainstModel(t *testing.T) {
	type entry struct {
		turns   int
		saved   bool
		expires time.Time
		missed  []time.Time // expiries; the message is its index in sent
		sent    []string
	}
	const ttl = time.Hour + 7*time.Microsecond // never ends with a terminal (MissedTTL) on a millisecond clock
	for seed := range uint64(20) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			ctx := context.Background()
			rng := rand.New(rand.NewPCG(seed, 1))
			clock := time.Unix(0, 0)
			m := NewMemoryConversations(ttl)
			m.max = 8
			m.now = func() time.Time { return clock }
			model := map[string]*entry{}
			end := func(e *entry) time.Time {
				out := e.expires
				for _, x := range e.missed {
					if x.After(out) {
						out = x
					}
				}
				return out
			}
			// live drops what expired, as the store's reads do.
			live := func(id string) *entry {
				e := model[id]
				if e == nil {
					return nil
				}
				var missed []time.Time
				var sent []string
				for i, x := range e.missed {
					if clock.Before(x) {
						missed, sent = append(missed, x), append(sent, e.sent[i])
					}
				}
				e.missed, e.sent = missed, sent
				if !clock.Before(e.expires) && len(e.missed) == 0 {
					delete(model, id)
					return nil
				}
				return e
			}
			entryFor := func(id string) *entry {
				for k, e := range model {
					if !clock.Before(end(e)) {
						delete(model, k)
					}
				}
				if e := live(id); e != nil {
					return e
				}
				for len(model) >= m.max {
					var first string
					for k, e := range model {
						if first == "" || end(e).Before(end(model[first])) {
							first = k
						}
					}
					delete(model, first)
				}
				e := &entry{}
				model[id] = e
				return e
			}
			for op := range 3000 {
				// A millisecond a step: no two entries end at once, so
				// the one to forget is never a tie.
				clock = clock.Add(time.Millisecond)
				id := fmt.Sprint("c", rng.IntN(14))
				switch rng.IntN(5) {
				case 0:
					turns := rng.IntN(5)
					conv := Conversation{Tenant: "t", Turns: make([]pipeline.Turn, turns)}
					require.NoError(t, m.Save(ctx, id, conv))
					e := entryFor(id)
					e.turns, e.saved, e.expires = turns, true, clock.Add(ttl)
				case 1:
					msg := fmt.Sprint("m", op)
					m.AddMissed(id, []byte(msg))
					e := entryFor(id)
					if len(e.missed) == MaxMissed {
						e.missed, e.sent = e.missed[1:], e.sent[1:]
					}
					e.missed, e.sent = append(e.missed, clock.Add(MissedTTL)), append(e.sent, msg)
				case 2:
					got, err := m.TakeMissed(ctx, id)
					require.NoError(t, err)
					var want []string
					if e := live(id); e != nil {
						want, e.missed, e.sent = e.sent, nil, nil
						if !clock.Before(e.expires) {
							delete(model, id)
						}
					}
					var gotS []string
					for _, b := range got {
						gotS = append(gotS, string(b))
					}
					require.Equal(t, want, gotS, "op %d: missed of %s", op, id)
				case 3:
					conv, ok, err := m.Load(ctx, id)
					require.NoError(t, err)
					e := live(id)
					wantOK := e != nil && e.saved && clock.Before(e.expires)
					require.Equal(t, wantOK, ok, "op %d: load %s", op, id)
					if ok {
						require.Len(t, conv.Turns, e.turns)
					}
				case 4:
					clock = clock.Add(time.Duration(rng.IntN(40_000)) * time.Millisecond)
				}
				require.LessOrEqual(t, len(m.convs), m.max)
				require.Len(t, m.byEnd, len(m.convs))
			}
		})
	}
}
