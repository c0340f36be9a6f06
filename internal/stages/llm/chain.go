package llm

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sony/gobreaker/v2"

	"github.com/voiced/voiced/internal/pipeline"
	"github.com/voiced/voiced/internal/stages/llm/extractive"
	"github.com/voiced/voiced/internal/stages/llm/provider"
)

// Degradation reasons; see the package documentation.
const (
	ReasonProviderFallback   = "provider_fallback"
	ReasonExtractiveFallback = "extractive_fallback"
	ReasonStreamInterrupted  = "stream_interrupted"
	ReasonTruncated          = "truncated"
	ReasonPolicyBlocked      = "policy_blocked"
)

// slot is one provider and model of the chain with its own breaker and
// learned speed.
type slot struct {
	p       provider.Provider
	name    string
	model   string
	cfg     ProviderConfig
	speed   *speed
	breaker *gobreaker.TwoStepCircuitBreaker[struct{}]
	// notFound is set once a 404 that is not about the model has been
	// reported as a configuration error, so it is reported once.
	notFound atomic.Bool
	// pricedAsAnswered is set once an attempt's spend was priced by the
	// model the provider said answered (the configured model has no
	// price): the provider is paid, and a reached cost cap skips it.
	pricedAsAnswered atomic.Bool
}

// paid reports whether s's model has a price, by its configured name or
// by the name it answered under.
func (c *Chain) paid(s *slot) bool {
	return c.cfg.Prices.price(s.model, "").paid() || s.pricedAsAnswered.Load()
}

// baseURLer is a provider that tells the API base its requests go to.
type baseURLer interface{ BaseURL() string }

// Chain is the LLM stage: providers in order, then the extractive
// responder. It is safe for concurrent use.
type Chain struct {
	cfg        Config
	log        *slog.Logger
	slots      []*slot
	extractive *extractive.Responder
	budget     *retryBudget
	cooldowns  Cooldowns
	m          *metrics
	transport  *http.Transport // owned, when the chain made its own client
	ledger     SpendLedger
	now        func() time.Time // the clock of the day totals
}

var _ pipeline.Generator = (*Chain)(nil)

// New builds the chain from cfg: the providers of cfg.Order that have an
// API key, then the extractive responder, which uses templ for the
// intent's response template. Metrics are registered on reg unless it is
// nil.
func New(cfg Config, templ pipeline.Templater, log *slog.Logger, reg prometheus.Registerer) (*Chain, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	names, err := cfg.order()
	if err != nil {
		return nil, err
	}
	if cfg.PricesFile != "" {
		file, err := LoadPrices(cfg.PricesFile)
		if err != nil {
			return nil, err
		}
		merged := Prices{}
		for _, p := range []Prices{cfg.Prices, file} {
			for model, pr := range p {
				merged[model] = pr
			}
		}
		cfg.Prices = merged
	}
	var transport *http.Transport
	client := cfg.HTTPClient
	if client == nil {
		transport = http.DefaultTransport.(*http.Transport).Clone()
		transport.MaxIdleConnsPerHost = 16
		client = &http.Client{Transport: transport}
	}
	var specs []spec
	for _, n := range names {
		p, pc, err := newProvider(n, cfg, client)
		if err != nil {
			return nil, err
		}
		if p != nil {
			specs = append(specs, spec{p: p, cfg: pc})
		}
	}
	c, err := newChain(cfg, templ, log, reg, specs)
	if err != nil {
		return nil, err
	}
	c.transport = transport
	return c, nil
}

// spec is a provider with its configuration, for newChain.
type spec struct {
	p   provider.Provider
	cfg ProviderConfig
}

// newChain builds a chain of the given providers; cfg has its defaults.
func newChain(cfg Config, templ pipeline.Templater, log *slog.Logger, reg prometheus.Registerer, specs []spec) (*Chain, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.MaxCostPerConversation < 0 || cfg.MaxCostPerDay < 0 || cfg.MaxCostPerTenantDay < 0 {
		return nil, errors.New("llm: a cost cap must be >= 0 US dollars (0: no cap)")
	}
	if _, ok := cfg.Ledger.(TenantLedger); cfg.MaxCostPerTenantDay > 0 && cfg.Ledger != nil && !ok {
		return nil, errors.New("llm: a cost cap per tenant needs a ledger that counts tenants (a TenantLedger)")
	}
	m, err := newMetrics(reg)
	if err != nil {
		return nil, fmt.Errorf("llm: register metrics: %w", err)
	}
	c := &Chain{
		cfg:        cfg,
		log:        log,
		extractive: extractive.New(extractive.Config{Templater: templ}),
		budget:     newRetryBudget(cfg.RetryRatio, cfg.RetryPerSecond, cfg.RetryBurst),
		cooldowns:  cfg.Cooldowns,
		m:          m,
		ledger:     cfg.Ledger,
		now:        time.Now,
	}
	if c.ledger == nil {
		c.ledger = NewMemoryLedger(cfg.SpendKeep)
	}
	capped := cfg.MaxCostPerConversation > 0 || cfg.MaxCostPerDay > 0 || cfg.MaxCostPerTenantDay > 0
	for _, sp := range specs {
		s := &slot{p: sp.p, name: sp.p.Name(), model: sp.p.Model(), cfg: sp.cfg, speed: newSpeed(sp.cfg.StartTTFT, sp.cfg.StartTPS, cfg.LearnAlpha)}
		gauge := m.breakerState.WithLabelValues(s.name, s.model)
		gauge.Set(0)
		failures := uint32(cfg.BreakerFailures)
		s.breaker = gobreaker.NewTwoStepCircuitBreaker[struct{}](gobreaker.Settings{
			Name:        s.name + "/" + s.model,
			MaxRequests: 1,
			Timeout:     cfg.BreakerOpen,
			ReadyToTrip: func(counts gobreaker.Counts) bool { return counts.ConsecutiveFailures >= failures },
			// Our own cancellations, invalid requests and policy blocks say
			// nothing about the provider's health; a base URL that answers
			// 404 or redirects is no request's fault and fails every one,
			// so it opens the breaker like a broken key rather than
			// costing each request its round trip.
			IsExcluded: func(err error) bool { return !provider.KindOf(err).Health() && badBaseURL(err) == "" },
			// Called with the breaker's lock held: only touch the gauge and
			// the logger, never the breaker.
			OnStateChange: func(name string, from, to gobreaker.State) {
				gauge.Set(float64(to))
				if to == gobreaker.StateOpen { // shared with the fleet; Start does not block
					cfg.Cooldowns.Start(CooldownKey(s.name, s.model), time.Now().Add(cfg.BreakerOpen), "breaker_open")
				}
				log.Warn("llm circuit breaker state change", "breaker", name, "from", from.String(), "to", to.String())
			},
		})
		c.slots = append(c.slots, s)
		if capped && !cfg.Prices.price(s.model, "").paid() {
			log.Warn("llm cost cap set but the model has no price: its spend counts as 0 and the cap never skips it (see -llm.prices)", "provider", s.name, "model", s.model)
		}
	}
	return c, nil
}

// Providers returns the names of the chain's links, in order, ending
// with "extractive".
func (c *Chain) Providers() []string {
	var out []string
	for _, s := range c.slots {
		out = append(out, s.name+"/"+s.model)
	}
	return append(out, extractive.Name)
}

// Warm opens a connection to every provider that supports it, in
// parallel, so the first answers do not pay for DNS, TCP and TLS. It
// returns once all are done or ctx ends; failures are only logged (a
// provider that cannot be reached now may be fine later).
func (c *Chain) Warm(ctx context.Context) {
	var wg sync.WaitGroup
	for _, s := range c.slots {
		w, ok := s.p.(provider.Warmer)
		if !ok {
			continue
		}
		wg.Go(func() {
			if err := w.Warm(ctx); err != nil {
				c.log.Warn("llm provider warm-up failed", "provider", s.name, "model", s.model, "err", err.Error())
			}
		})
	}
	wg.Wait()
}

// Close releases idle upstream connections. Generate must not be running.
func (c *Chain) Close() error {
	if c.transport != nil {
		c.transport.CloseIdleConnections()
	}
	return nil
}

// Generate implements pipeline.Generator. The deadline of ctx (or
// DefaultBudget when it has none) is the one deadline of every attempt.
func (c *Chain) Generate(ctx context.Context, req pipeline.GenerateRequest, emit func(string)) (pipeline.Generation, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.cfg.DefaultBudget)
		defer cancel()
	}
	deadline, _ := ctx.Deadline()
	c.budget.deposit()
	r := &run{c: c, ctx: ctx, deadline: deadline, req: req, emit: emit, key: c.spendKey(req.ConversationID, req.Tenant)}
	r.capped = c.capReached(ctx, r.key)
	gen, err := r.generate()
	outcome := "ok"
	switch {
	case errors.Is(err, pipeline.ErrPolicyBlocked):
		outcome = "policy_blocked"
	case err != nil && errors.Is(ctx.Err(), context.Canceled):
		// The request was cancelled (barge-in, replaced, gone): the
		// answer did not fail.
		outcome = "cancelled"
	case err != nil:
		outcome = "error"
	case len(gen.Degradation) > 0:
		outcome = "degraded"
	}
	c.m.answers.WithLabelValues(gen.Provider, outcome).Inc()
	return gen, err
}

// run is the state of one Generate call.
type run struct {
	c        *Chain
	ctx      context.Context
	deadline time.Time
	req      pipeline.GenerateRequest
	emit     func(string)

	sent     bool // text has reached the client: no more retries or fallbacks
	degr     []string
	fellBack bool // a provider before the current one was given up

	key    SpendKey
	capped string // the cost cap reached ("conversation", "tenant", "day"), or ""
}

// errSkipped marks a provider that was not attempted.
var errSkipped = errors.New("provider skipped")

func (r *run) generate() (pipeline.Generation, error) {
	costSkipped := false
	for i, s := range r.c.slots {
		if r.capped != "" && r.c.paid(s) {
			r.c.m.skips.WithLabelValues(s.name, s.model, "cost_cap").Inc()
			if !costSkipped {
				costSkipped = true
				r.c.m.capped.WithLabelValues(r.capped).Inc()
				r.degr = append(r.degr, ReasonCostCap)
			}
			continue
		}
		r.fellBack = i > 0
		t := r.tryProvider(s)
		if t.finished {
			if i > 0 && t.err == nil {
				t.gen.Degradation = append([]string{ReasonProviderFallback}, t.gen.Degradation...)
			}
			return t.gen, t.err
		}
		if !t.next {
			break
		}
	}
	if len(r.c.slots) > 0 {
		r.degr = append(r.degr, ReasonExtractiveFallback)
	}
	req := r.req
	if started := req.Started; started != nil {
		degr := slices.Clone(r.degr)
		req.Started = func(g pipeline.Generation) {
			g.Degradation = degr
			started(g)
		}
	}
	gen, err := r.c.extractive.Generate(r.ctx, req, r.emit)
	gen.Degradation = r.degr
	return gen, err
}

// startedAs is what the chain announces (GenerateRequest.Started) as
// provider s's first piece goes out: s, the evidence it was given, and
// the degradation so far (a provider given up before it, a cost cap).
func (r *run) startedAs(s *slot) pipeline.Generation {
	degr := slices.Clone(r.degr)
	if r.fellBack {
		degr = append([]string{ReasonProviderFallback}, degr...)
	}
	return pipeline.Generation{Provider: s.name, Model: s.model, Sources: r.c.evidence(r.req), Degradation: degr}
}

// tried is what the attempts on one provider came to.
type tried struct {
	gen pipeline.Generation
	err error
	// finished means the request is answered (or ended: policy block, our
	// cancellation); else next says whether the next provider may be
	// tried.
	finished, next bool
}

// tryProvider makes the attempts on one provider.
func (r *run) tryProvider(s *slot) tried {
	gen := pipeline.Generation{Provider: s.name, Model: s.model, Sources: r.c.evidence(r.req)}
	for attempt := 0; ; attempt++ {
		res, aerr := r.attempt(s)
		if errors.Is(aerr, errSkipped) {
			return tried{gen: gen, next: true}
		}
		if res.Model != "" {
			gen.Model = res.Model
		}
		kind := provider.KindOf(aerr)
		if r.sent {
			// Committed: the client has text, so whatever happened, the
			// answer is what was sent.
			switch {
			case aerr == nil:
			case kind == provider.KindEmpty: // cut by the length limit before a full sentence
				r.degr = append(r.degr, ReasonTruncated)
			case kind == provider.KindPolicy:
				r.degr = append(r.degr, ReasonStreamInterrupted, ReasonPolicyBlocked)
			default:
				r.degr = append(r.degr, ReasonStreamInterrupted)
			}
			if aerr == nil && res.FinishReason == provider.FinishLength {
				r.degr = append(r.degr, ReasonTruncated)
			}
			gen.Degradation = r.degr
			if kind == provider.KindCanceled && r.ctx.Err() != nil && !errors.Is(r.ctx.Err(), context.DeadlineExceeded) {
				return tried{gen: gen, err: fmt.Errorf("llm: %w", context.Cause(r.ctx)), finished: true} // cancelled by the caller (barge-in)
			}
			return tried{gen: gen, finished: true}
		}
		switch {
		case kind == provider.KindPolicy:
			return tried{gen: gen, err: fmt.Errorf("%w: %w", pipeline.ErrPolicyBlocked, aerr), finished: true}
		case kind == provider.KindCanceled && r.ctx.Err() != nil:
			return tried{gen: gen, err: fmt.Errorf("llm: %w", context.Cause(r.ctx)), finished: true}
		}
		if kind.Retry() && attempt < r.c.cfg.MaxRetries {
			if ok, cerr := r.retryWait(s, aerr, attempt); cerr != nil {
				return tried{gen: gen, err: cerr, finished: true}
			} else if ok {
				continue
			}
		}
		r.c.m.fallbacks.WithLabelValues(s.name, kind.String()).Inc()
		return tried{gen: gen, next: kind.Fallback(r.c.cfg.AuthFallback)}
	}
}

// retryWait decides whether to retry s after aerr and waits for it: the
// server's requested wait, else a jittered exponential backoff. A wait
// that would leave too little time for the retry is not slept. cerr is
// non-nil when the request's context ended during the wait.
func (r *run) retryWait(s *slot, aerr error, attempt int) (ok bool, cerr error) {
	var wait time.Duration
	if pe, isPE := errors.AsType[*provider.Error](aerr); isPE {
		wait = pe.RetryAfter
	}
	if wait == 0 {
		d := r.c.cfg.RetryBaseDelay << attempt
		wait = d/2 + rand.N(d/2+1)
	}
	// The failure just reported may have opened the breaker for longer
	// than the wait, and another instance may have set a cooldown that
	// outlasts it: either way admit would skip the retry, after a wait
	// taken from the next provider's time.
	switch {
	case s.breaker.State() == gobreaker.StateOpen && wait < r.c.cfg.BreakerOpen:
		// It opened at this failure (the attempt was admitted), so it
		// is still open when the wait ends.
		r.c.m.retriesDenied.WithLabelValues(s.name, s.model, "breaker_open").Inc()
		return false, nil
	case r.c.cooldowns.Until(CooldownKey(s.name, s.model)).After(time.Now().Add(wait)):
		r.c.m.retriesDenied.WithLabelValues(s.name, s.model, "cooldown").Inc()
		return false, nil
	}
	ttft, tps := s.speed.get()
	if time.Until(r.deadline)-r.c.cfg.Reserve-wait < timeFor(r.c.cfg.MinTokens, ttft, tps) {
		r.c.m.retriesDenied.WithLabelValues(s.name, s.model, "no_time").Inc()
		return false, nil
	}
	if !r.c.budget.withdraw() {
		r.c.m.retriesDenied.WithLabelValues(s.name, s.model, "budget").Inc()
		return false, nil
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
	case <-r.ctx.Done():
		return false, fmt.Errorf("llm: %w", context.Cause(r.ctx))
	}
	r.c.m.retries.WithLabelValues(s.name, s.model).Inc()
	return true, nil
}

// errFirstToken and errStall are the causes of abandoned attempts.
var (
	errFirstToken = fmt.Errorf("%w: no first token within the limit", provider.ErrNoProgress)
	errStall      = fmt.Errorf("%w: stream stalled", provider.ErrNoProgress)
)

// attempt makes one attempt on s, or returns errSkipped when the breaker
// is open or the time left cannot cover the provider's expected time to
// first token plus a few tokens.
func (r *run) attempt(s *slot) (provider.Result, error) {
	cfg := &r.c.cfg
	now := time.Now()
	left := r.deadline.Sub(now) - cfg.Reserve
	ttft, tps := s.speed.get()
	done, ok := r.admit(s, left, ttft, tps)
	if !ok {
		return provider.Result{}, errSkipped
	}
	budget := min(s.cfg.Cap, left)
	maxTokens := outputTokens(budget, ttft, tps, r.req.Synthesis, cfg.MinTokens, cfg.MaxOutputTokens)
	// The attempt ends budget after now, when left was measured: the time
	// spent sizing and building the request comes out of the attempt, not
	// out of the reserve.
	st := r.stream(s, r.c.buildRequest(r.req, maxTokens), now.Add(budget))
	err := st.judge(s, r.ctx.Err() == nil && budget == s.cfg.Cap)
	r.observeSpeed(s, st, err)
	done(err)
	r.c.coolDown(s, err)
	r.record(s, err, st.res)
	r.spend(s, st.res.InputTokens, st.res.OutputTokens, st.res.Model)
	return st.res, err
}

// admit says whether s may be tried now, with the time left, and counts
// why not: too little time for its expected first token and a few more, a
// cooldown, an open breaker. done reports the attempt's outcome to the
// breaker.
func (r *run) admit(s *slot, left, ttft time.Duration, tps float64) (done func(error), ok bool) {
	if left < timeFor(r.c.cfg.MinTokens, ttft, tps) {
		if startTTFT, startTPS := s.speed.start(); left >= timeFor(r.c.cfg.MinTokens, startTTFT, startTPS) {
			// Skipped for its learned slowness alone: learn back towards
			// the configured speed, so it is tried again in time.
			s.speed.relax()
		}
		r.c.m.skips.WithLabelValues(s.name, s.model, "no_time").Inc()
		return nil, false
	}
	// A breaker open here is counted as such; a cooldown from elsewhere
	// (or from a rate limit) as a cooldown.
	if s.breaker.State() != gobreaker.StateOpen && r.c.cooling(s) {
		r.c.m.skips.WithLabelValues(s.name, s.model, "cooldown").Inc()
		return nil, false
	}
	done, err := s.breaker.Allow()
	if err != nil {
		r.c.m.skips.WithLabelValues(s.name, s.model, "breaker_open").Inc()
		return nil, false
	}
	return done, true
}

// streamed is what one attempt's stream gave.
type streamed struct {
	res  provider.Result
	err  error
	text strings.Builder
	// start is when the attempt began, first and last when its first and
	// last pieces of text came.
	start, first, last time.Time
}

// stream runs one attempt on s until end, passing its pieces on, and
// cuts it when the first token or the next one is too long in coming.
func (r *run) stream(s *slot, preq *provider.Request, end time.Time) *streamed {
	st := &streamed{start: time.Now()}
	actx, cancel := context.WithDeadline(r.ctx, end)
	defer cancel()
	actx, cancelCause := context.WithCancelCause(actx)
	defer cancelCause(nil)
	// One timer serves as the time-to-first-token limit, then as the
	// stall limit between pieces.
	timer := time.AfterFunc(s.cfg.TTFTLimit, func() { cancelCause(errFirstToken) })
	defer timer.Stop()
	r.c.m.attempts.WithLabelValues(s.name, s.model).Inc()
	st.res, st.err = s.p.Stream(actx, preq, func(piece string) {
		if piece == "" || (st.text.Len() == 0 && strings.TrimSpace(piece) == "") {
			// Nothing said yet: whitespace ahead of an answer (a local
			// model's leading newline) neither commits the chain to this
			// provider nor makes an empty answer look like one.
			return
		}
		now := time.Now()
		st.last = now
		if st.first.IsZero() {
			st.first = now
			timer.Stop()
			timer = time.AfterFunc(r.c.cfg.StallLimit, func() { cancelCause(errStall) })
		} else {
			timer.Reset(r.c.cfg.StallLimit)
		}
		st.text.WriteString(piece)
		if !r.sent && r.req.Started != nil {
			r.req.Started(r.startedAs(s))
		}
		r.sent = true
		r.emit(piece)
	})
	timer.Stop()
	if st.err != nil && st.res.FinishReason != "" && actx.Err() != nil && r.ctx.Err() == nil {
		// The finish reason had come: the answer was complete, and only
		// its tail (a usage chunk, [DONE], message_stop, the end of a
		// Gemini stream) was late, cut by the stall limit or by the
		// attempt's own end (the provider's cap, the deadline less the
		// reserve). Neither the answer nor the provider is at fault;
		// usage that came is counted. (Older Gemini models
		// put a finish reason on every chunk: once text was seen to
		// follow one, the adapter reports no finish reason for a cut
		// stream of that model, so a stall mid-answer stays
		// interrupted. Only a cut after the very first chunk of such a
		// model's first stream still passes for an end.)
		st.err = nil
	}
	return st
}

// judge returns the attempt's error: the stream's, a timeout when it
// used up the provider's own cap (capped: the cap, not the request,
// bounded it), or an empty answer.
func (st *streamed) judge(s *slot, capped bool) error {
	err := st.err
	if err != nil && provider.KindOf(err) == provider.KindCanceled && capped {
		// The attempt used up the provider's own cap while the request
		// still had time: the provider was too slow.
		return &provider.Error{Kind: provider.KindTimeout, Provider: s.name, Model: s.model, Message: "provider cap reached", Err: err}
	}
	if err != nil {
		return err
	}
	switch {
	case st.text.Len() == 0:
		return &provider.Error{Kind: provider.KindEmpty, Provider: s.name, Model: s.model, Code: st.res.FinishReason, Message: "empty answer"}
	case st.res.FinishReason == provider.FinishLength && !hasSentence(st.text.String()):
		return &provider.Error{Kind: provider.KindEmpty, Provider: s.name, Model: s.model, Code: "length", Message: "cut by the length limit before a full sentence"}
	}
	return nil
}

// observeSpeed learns s's time to first token, and its tokens a second
// from an attempt that succeeded.
func (r *run) observeSpeed(s *slot, st *streamed, err error) {
	if st.first.IsZero() {
		return
	}
	d := st.first.Sub(st.start)
	s.speed.observeTTFT(d)
	r.c.m.ttft.WithLabelValues(s.name, s.model).Observe(d.Seconds())
	if err != nil {
		return
	}
	tokens := st.res.OutputTokens
	if tokens == 0 {
		tokens = (st.text.Len() + 3) / 4 // about four characters a token
	}
	// From the first piece to the last: what follows the text (a tail
	// held back until the stall limit, the drain) is not generation.
	if gen := st.last.Sub(st.first); tokens > 1 && gen > 0 {
		s.speed.observeTPS(tokens, gen)
		r.c.m.tps.WithLabelValues(s.name, s.model).Observe(float64(tokens-1) / gen.Seconds())
	}
}

// record counts and logs the outcome of one attempt. Errors are already
// redacted by the adapters; the transcript is never logged.
func (r *run) record(s *slot, err error, res provider.Result) {
	if err == nil {
		r.c.m.successes.WithLabelValues(s.name, s.model).Inc()
		return
	}
	kind := provider.KindOf(err)
	r.c.m.failures.WithLabelValues(s.name, s.model, kind.String()).Inc()
	r.reportBadBaseURL(s, err)
	attrs := []any{"provider", s.name, "model", s.model, "kind", kind.String(), "request_id", res.RequestID, "err", err.Error()}
	switch kind {
	case provider.KindAuth:
		r.c.m.authFailures.WithLabelValues(s.name, s.model).Inc()
		r.c.log.Error("llm provider rejected our credentials: check the API key and its permissions", attrs...)
	case provider.KindCanceled:
		r.c.log.Debug("llm attempt cancelled", attrs...)
	default:
		r.c.log.Warn("llm attempt failed", attrs...)
	}
}

// reportBadBaseURL logs, once per provider, an attempt answered 404 for
// another reason than an unknown model, or redirected to another host:
// the base URL points at no such API, which is a configuration error that
// retries will not mend. The attempt's own failure is logged as well, as
// every failure is.
func (r *run) reportBadBaseURL(s *slot, err error) {
	msg := badBaseURL(err)
	if msg == "" || s.notFound.Swap(true) {
		return
	}
	base := ""
	if b, ok := s.p.(baseURLer); ok {
		base = provider.SafeURL(b.BaseURL())
	}
	r.c.log.Error(msg,
		"provider", s.name, "model", s.model, "base_url", base, "check", baseURLSource(s.name, s.cfg),
		"hint", "Anthropic and Gemini take the host without the API version; OpenAI-compatible servers the URL before /chat/completions, usually ending in /v1")
}

// badBaseURL says how err shows a base URL that points at no such API: a
// 404 for another reason than an unknown model, or a redirect to another
// host. "" when it does not.
func badBaseURL(err error) string {
	pe, ok := errors.AsType[*provider.Error](err)
	if !ok || pe.Kind == provider.KindModelNotFound {
		return ""
	}
	switch {
	case pe.Status == http.StatusNotFound:
		return "llm configuration error: the provider's base URL answers 404 Not Found"
	case pe.Status >= 300 && pe.Status < 400:
		return "llm configuration error: the provider's base URL redirects to another host, which voiced does not follow (the API key would go with it)"
	}
	return ""
}

// hasSentence reports whether text holds at least one finished sentence.
func hasSentence(text string) bool {
	return strings.ContainsAny(text, ".!?")
}
