package llm

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the chain's Prometheus collectors. Labels never carry keys
// or request text: provider, model, kind and reason are from fixed sets
// or configuration.
type metrics struct {
	attempts      *prometheus.CounterVec   // provider, model
	successes     *prometheus.CounterVec   // provider, model
	failures      *prometheus.CounterVec   // provider, model, kind
	authFailures  *prometheus.CounterVec   // provider, model: alert on any increase
	retries       *prometheus.CounterVec   // provider, model
	retriesDenied *prometheus.CounterVec   // provider, model, reason (budget, no_time, breaker_open, cooldown)
	fallbacks     *prometheus.CounterVec   // from provider, kind
	skips         *prometheus.CounterVec   // provider, model, reason (cooldown, breaker_open, no_time, cost_cap)
	breakerState  *prometheus.GaugeVec     // provider, model: 0 closed, 1 half-open, 2 open
	ttft          *prometheus.HistogramVec // provider, model
	tps           *prometheus.HistogramVec // provider, model
	answers       *prometheus.CounterVec   // provider, outcome (ok, degraded, policy_blocked, cancelled, error)
	tokens        *prometheus.CounterVec   // provider, model, direction (input, output)
	cost          *prometheus.CounterVec   // provider, model
	capped        *prometheus.CounterVec   // scope (conversation, tenant, day)
	spendErrors   *prometheus.CounterVec   // op (read, add)
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	l2 := []string{"provider", "model"}
	m := &metrics{
		attempts:      prometheus.NewCounterVec(prometheus.CounterOpts{Name: "voiced_llm_attempts_total", Help: "LLM provider attempts started."}, l2),
		successes:     prometheus.NewCounterVec(prometheus.CounterOpts{Name: "voiced_llm_attempt_successes_total", Help: "LLM provider attempts that produced a complete answer."}, l2),
		failures:      prometheus.NewCounterVec(prometheus.CounterOpts{Name: "voiced_llm_attempt_failures_total", Help: "LLM provider attempts that failed, by error kind."}, []string{"provider", "model", "kind"}),
		authFailures:  prometheus.NewCounterVec(prometheus.CounterOpts{Name: "voiced_llm_auth_failures_total", Help: "Authentication or permission failures: a broken or revoked API key. Alert on any increase."}, l2),
		retries:       prometheus.NewCounterVec(prometheus.CounterOpts{Name: "voiced_llm_retries_total", Help: "Retries of the same provider."}, l2),
		retriesDenied: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "voiced_llm_retries_denied_total", Help: "Retries not made: retry budget empty, the wait did not fit in the time left, the breaker opened, or a cooldown outlasts the wait."}, []string{"provider", "model", "reason"}),
		fallbacks:     prometheus.NewCounterVec(prometheus.CounterOpts{Name: "voiced_llm_fallbacks_total", Help: "Moves from a provider to the next link of the chain (another provider or the extractive responder), by the kind that caused it."}, []string{"from", "kind"}),
		skips:         prometheus.NewCounterVec(prometheus.CounterOpts{Name: "voiced_llm_skips_total", Help: "Providers not attempted: in a cooldown (a 429 with a wait, quota, an open breaker, here or on another instance: cooldown), breaker open (breaker_open), too little time left (no_time), or a cost cap reached for a priced model (cost_cap)."}, []string{"provider", "model", "reason"}),
		breakerState:  prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "voiced_llm_breaker_state", Help: "Circuit breaker state: 0 closed, 1 half-open, 2 open."}, l2),
		ttft:          prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "voiced_llm_time_to_first_token_seconds", Help: "Time from request to first text piece.", Buckets: []float64{.05, .1, .15, .2, .25, .3, .4, .5, .7, 1, 2}}, l2),
		tps:           prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "voiced_llm_tokens_per_second", Help: "Output tokens per second after the first token.", Buckets: []float64{10, 20, 40, 60, 80, 100, 150, 200, 300, 500}}, l2),
		answers:       prometheus.NewCounterVec(prometheus.CounterOpts{Name: "voiced_llm_answers_total", Help: "Answers by the link that produced them and outcome (ok, degraded, policy_blocked, cancelled: the request was, error)."}, []string{"provider", "outcome"}),
		tokens:        prometheus.NewCounterVec(prometheus.CounterOpts{Name: "voiced_llm_tokens_total", Help: "Tokens billed by LLM providers, as their usage fields report them, by direction (input, output)."}, []string{"provider", "model", "direction"}),
		cost:          prometheus.NewCounterVec(prometheus.CounterOpts{Name: "voiced_llm_cost_usd_total", Help: "Cost of LLM provider tokens in US dollars, from the price table (-llm.prices); models without a price count 0."}, l2),
		capped:        prometheus.NewCounterVec(prometheus.CounterOpts{Name: "voiced_llm_cost_capped_total", Help: "Answers given without the paid providers because a cost cap was reached, by the cap (conversation, tenant, day)."}, []string{"scope"}),
		spendErrors:   prometheus.NewCounterVec(prometheus.CounterOpts{Name: "voiced_llm_spend_ledger_errors_total", Help: "Spend ledger calls that failed or ran out of time (op: read, add); a failed read applies no cap."}, []string{"op"}),
	}
	if reg == nil {
		return m, nil
	}
	var errs []error
	for _, c := range []prometheus.Collector{m.attempts, m.successes, m.failures, m.authFailures, m.retries, m.retriesDenied, m.fallbacks, m.skips, m.breakerState, m.ttft, m.tps, m.answers, m.tokens, m.cost, m.capped, m.spendErrors} {
		errs = append(errs, reg.Register(c))
	}
	return m, errors.Join(errs...)
}
