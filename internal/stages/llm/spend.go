package llm

import (
	"bytes"
	"container/list"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sync"
	"time"

	"go.yaml.in/yaml/v3"
)

// ReasonCostCap is the degradation reason of an answer given while a
// spending cap is reached: the paid providers were skipped.
const ReasonCostCap = "cost_cap"

// Price is what one model costs, in US dollars per million tokens.
type Price struct {
	Input  float64 `yaml:"input"`
	Output float64 `yaml:"output"`
}

// paid reports whether the model costs anything.
func (p Price) paid() bool { return p.Input > 0 || p.Output > 0 }

// cost is the price of the tokens.
func (p Price) cost(in, out int) float64 {
	return (float64(in)*p.Input + float64(out)*p.Output) / 1e6
}

// Prices maps model names to their prices. A model that is not in the
// table costs 0: voiced ships no prices of its own (they change, and a
// wrong built-in price is worse than none), so without a price file
// every model is free to it, spend stays 0 and the caps never trigger.
type Prices map[string]Price

// price looks up the configured model, then the model the provider said
// answered (an API may answer "gpt-4o-mini" with
// "gpt-4o-mini-2024-07-18").
func (p Prices) price(configured, answered string) Price {
	if pr, ok := p[configured]; ok {
		return pr
	}
	return p[answered]
}

// LoadPrices reads a price table: YAML or JSON (YAML is a superset), one
// entry per model with its input and output price in US dollars per
// million tokens:
//
//	gpt-4o-mini: {input: 0.15, output: 0.60}
//	claude-haiku-4-5: {input: 1.00, output: 5.00}
//
// Unknown fields and negative or non-finite prices are errors.
func LoadPrices(path string) (Prices, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("llm: price table: %w", err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	var p Prices
	if err := dec.Decode(&p); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("llm: price table %s: %w", path, err)
	}
	if err := p.validate(); err != nil {
		return nil, fmt.Errorf("llm: price table %s: %w", path, err)
	}
	return p, nil
}

// validate refuses negative and non-finite prices: a NaN cost added to a
// total makes it NaN, which no cap comparison ever reaches.
func (p Prices) validate() error {
	for model, pr := range p {
		for dir, v := range map[string]float64{"input": pr.Input, "output": pr.Output} {
			if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
				return fmt.Errorf("model %q: %s price %v: want a number >= 0 (US dollars per million tokens)", model, dir, v)
			}
		}
	}
	return nil
}

// SpendKey names the spending totals one request counts against: its
// conversation's, its day's (UTC, "2006-01-02"), and its tenant's that
// day.
type SpendKey struct {
	Conversation string // empty: the request has no conversation total
	Day          string
	// Tenant is the client the request is spent for (the identity of an
	// access token, pipeline.GenerateRequest.Tenant); empty: no tenant
	// total.
	Tenant string
}

// SpendTotals are the totals of a SpendKey, in US dollars.
type SpendTotals struct {
	Conversation, Day float64
	// TenantDay is the tenant's spend on the key's day.
	TenantDay float64
}

// SpendLedger keeps spending totals in US dollars. The chain adds the
// cost of every attempt and reads the totals before each answer. The
// default, NewMemoryLedger, counts within this process; a ledger shared
// by a fleet (Redis) counts across instances. Both calls run on the
// request's path: an implementation that talks over a network must bound
// them by ctx, whose deadline is short. An error never fails a request:
// a failed read is taken as no spend, a failed add is logged.
type SpendLedger interface {
	AddSpend(ctx context.Context, key SpendKey, usd float64) error
	Spent(ctx context.Context, key SpendKey) (conversation, day float64, err error)
}

// TenantLedger is a SpendLedger that also counts each tenant's day
// (SpendKey.Tenant), read with the others in one call (Totals), so that a
// shared ledger reads them in one round trip. Both ledgers of voiced are
// one; a chain with a cap per tenant needs one.
type TenantLedger interface {
	SpendLedger
	Totals(ctx context.Context, key SpendKey) (SpendTotals, error)
}

// MemoryLedger is the in-process SpendLedger. Conversations idle for a
// day (or the longer keep given to NewMemoryLedger) are forgotten, at
// most MaxLedgerConversations are held, and only today's and yesterday's
// day totals are kept, so it stays small.
type MemoryLedger struct {
	idle      time.Duration // SpendKeep
	mu        sync.Mutex
	convs     map[string]*convSpend
	days      map[string]float64
	lastSweep time.Time
	now       func() time.Time
	maxConvs  int // MaxLedgerConversations; less in tests
	// byLast holds the conversations' ids, the one that spent least
	// recently first: the idle and the evicted are taken from its front,
	// so neither the sweep nor making room walks (or sorts) every
	// conversation under mu, which every answer's cost check takes.
	byLast *list.List
	// tenantDays are the tenants' totals, by day (those of days),
	// then tenant: as few as the server's tokens.
	tenantDays map[string]map[string]float64
}

type convSpend struct {
	usd  float64
	last time.Time
	el   *list.Element // in byLast
}

var _ TenantLedger = (*MemoryLedger)(nil)

// MinSpendKeep is the least time a conversation's total outlives its last
// spend (see Config.SpendKeep).
const MinSpendKeep = 24 * time.Hour

// SpendKeep is how long a ledger keeps a conversation's total after its
// last spend: keep, but at least MinSpendKeep.
func SpendKeep(keep time.Duration) time.Duration { return max(keep, MinSpendKeep) }

// MaxLedgerConversations is the most conversations a MemoryLedger holds.
// Every session is a new conversation unless resumed, so under steady
// churn the ledger would hold every conversation that spent in the last
// MinSpendKeep (about 100 B each, 48 times the default conversation TTL):
// when it is full, the 1% that spent least recently make room, as in
// the session's MemoryConversations.
const MaxLedgerConversations = 100_000

// NewMemoryLedger returns an empty in-process ledger that keeps a
// conversation's total for SpendKeep(keep) after its last spend.
func NewMemoryLedger(keep time.Duration) *MemoryLedger {
	return &MemoryLedger{idle: SpendKeep(keep), convs: map[string]*convSpend{}, days: map[string]float64{}, now: time.Now,
		tenantDays: map[string]map[string]float64{}, maxConvs: MaxLedgerConversations, byLast: list.New()}
}

// AddSpend implements SpendLedger.
func (l *MemoryLedger) AddSpend(_ context.Context, key SpendKey, usd float64) error {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if key.Conversation != "" {
		c := l.convs[key.Conversation]
		if c == nil {
			if len(l.convs) >= l.maxConvs {
				l.makeRoomLocked(now)
			}
			c = &convSpend{el: l.byLast.PushBack(key.Conversation)}
			l.convs[key.Conversation] = c
		} else {
			l.byLast.MoveToBack(c.el)
		}
		c.usd += usd
		c.last = now
	}
	if key.Day != "" {
		if _, ok := l.days[key.Day]; !ok {
			// A day not seen yet: forget the days before yesterday. Not
			// by key.Day, which is the day its request started: one that
			// ran across midnight adds to yesterday after today began.
			today, prev := dayKey(now), dayKey(now.Add(-24*time.Hour))
			for d := range l.days {
				if d != today && d != prev {
					delete(l.days, d)
					delete(l.tenantDays, d)
				}
			}
		}
		l.days[key.Day] += usd
		if key.Tenant != "" {
			t := l.tenantDays[key.Day]
			if t == nil {
				t = map[string]float64{}
				l.tenantDays[key.Day] = t
			}
			t[key.Tenant] += usd
		}
	}
	if now.Sub(l.lastSweep) > time.Minute {
		l.sweepLocked(now)
	}
	return nil
}

// sweepLocked forgets the conversations idle for l.idle; l.mu must be
// held.
func (l *MemoryLedger) sweepLocked(now time.Time) {
	l.lastSweep = now
	for el := l.byLast.Front(); el != nil; el = l.byLast.Front() {
		id := el.Value.(string)
		if now.Sub(l.convs[id].last) <= l.idle {
			return
		}
		l.forgetLocked(id)
	}
}

// forgetLocked forgets conversation id; l.mu must be held.
func (l *MemoryLedger) forgetLocked(id string) {
	l.byLast.Remove(l.convs[id].el)
	delete(l.convs, id)
}

// makeRoomLocked forgets the idle conversations, then, if the ledger is
// still full, the 1% (at least one) that spent least recently; l.mu must
// be held.
func (l *MemoryLedger) makeRoomLocked(now time.Time) {
	l.sweepLocked(now)
	if len(l.convs) < l.maxConvs {
		return
	}
	for range max(len(l.convs)/100, 1) {
		l.forgetLocked(l.byLast.Front().Value.(string))
	}
}

// Spent implements SpendLedger.
func (l *MemoryLedger) Spent(ctx context.Context, key SpendKey) (conversation, day float64, err error) {
	t, err := l.Totals(ctx, key)
	return t.Conversation, t.Day, err
}

// Totals implements TenantLedger.
func (l *MemoryLedger) Totals(_ context.Context, key SpendKey) (SpendTotals, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var t SpendTotals
	if c := l.convs[key.Conversation]; c != nil && key.Conversation != "" {
		t.Conversation = c.usd
	}
	t.Day = l.days[key.Day]
	if key.Tenant != "" {
		t.TenantDay = l.tenantDays[key.Day][key.Tenant]
	}
	return t, nil
}

// dayKey is the UTC day of t.
func dayKey(t time.Time) string { return t.UTC().Format(time.DateOnly) }

// spendKey is the key of a request of conversation starting now, spent
// for tenant ("": none).
func (c *Chain) spendKey(conversation, tenant string) SpendKey {
	return SpendKey{Conversation: conversation, Day: dayKey(c.now()), Tenant: tenant}
}

// capReached reads the totals and reports which cap, if any, is reached:
// "conversation", "tenant", "day" or "". With no cap set it reads
// nothing; it reads every total with one ledger call.
func (c *Chain) capReached(ctx context.Context, key SpendKey) string {
	perConv, perDay, perTenant := c.cfg.MaxCostPerConversation, c.cfg.MaxCostPerDay, c.cfg.MaxCostPerTenantDay
	if perConv <= 0 && perDay <= 0 && (perTenant <= 0 || key.Tenant == "") {
		return ""
	}
	lctx, cancel := context.WithTimeout(ctx, c.cfg.SpendTimeout)
	defer cancel()
	var t SpendTotals
	var err error
	if tl, ok := c.ledger.(TenantLedger); ok {
		t, err = tl.Totals(lctx, key)
	} else { // no cap per tenant (newChain refuses one)
		t.Conversation, t.Day, err = c.ledger.Spent(lctx, key)
	}
	if err != nil {
		c.m.spendErrors.WithLabelValues("read").Inc()
		c.log.Debug("llm spend ledger read failed; no cap applied", "err", err.Error())
		return ""
	}
	switch {
	case perConv > 0 && key.Conversation != "" && t.Conversation >= perConv:
		return "conversation"
	case perTenant > 0 && key.Tenant != "" && t.TenantDay >= perTenant:
		return "tenant"
	case perDay > 0 && t.Day >= perDay:
		return "day"
	}
	return ""
}

// spend counts the tokens of one attempt, as the provider reported them,
// and adds their cost to the ledger. The cost is spent whatever became of
// the request, so the ledger call is not cancelled with it.
func (r *run) spend(s *slot, in, out int, answered string) {
	if in <= 0 && out <= 0 {
		return
	}
	m := r.c.m
	m.tokens.WithLabelValues(s.name, s.model, "input").Add(float64(max(in, 0)))
	m.tokens.WithLabelValues(s.name, s.model, "output").Add(float64(max(out, 0)))
	usd := r.c.cfg.Prices.price(s.model, answered).cost(max(in, 0), max(out, 0))
	if !(usd > 0) || math.IsInf(usd, 0) { // NaN included
		return
	}
	if !r.c.cfg.Prices.price(s.model, "").paid() {
		s.pricedAsAnswered.Store(true) // priced by the model that answered
	}
	m.cost.WithLabelValues(s.name, s.model).Add(usd)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.ctx), r.c.cfg.SpendTimeout)
	defer cancel()
	if err := r.c.ledger.AddSpend(ctx, r.key, usd); err != nil {
		m.spendErrors.WithLabelValues("add").Inc()
		r.c.log.Warn("llm spend ledger add failed; this spend is not counted against the caps", "provider", s.name, "model", s.model, "err", err.Error())
	}
}
