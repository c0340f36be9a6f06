package pipeline

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the pipeline's Prometheus collectors. A nil *Metrics records
// nothing.
type Metrics struct {
	stageSeconds    *prometheus.HistogramVec
	degradations    *prometheus.CounterVec
	llmStartLeftSec prometheus.Histogram
}

// NewMetrics creates the pipeline's collectors and registers them on reg
// (when reg is not nil).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		stageSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "voiced", Name: "stage_duration_seconds",
			Help:    "Duration of pipeline stages by stage and outcome (ok, timeout, cancelled, skipped, error).",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .2, .3, .5, .75, 1, 1.5, 2},
		}, []string{"stage", "outcome"}),
		degradations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "voiced", Name: "degradations_total",
			Help: "Degraded answers by reason (requests that ended in an error, or whose result was not sent, are not answers and not counted).",
		}, []string{"reason"}),
		llmStartLeftSec: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "voiced", Name: "llm_start_time_left_seconds",
			Help:    "Time left when the LLM stage started, before the pipeline's deadline: the request deadline less the terminal margin (the result's budget.llmStartLeftMs counts to the request deadline).",
			Buckets: []float64{.1, .2, .3, .4, .5, .6, .8, 1, 1.2, 1.5, 2},
		}),
	}
	if reg != nil {
		reg.MustRegister(m.stageSeconds, m.degradations, m.llmStartLeftSec)
	}
	return m
}

func (m *Metrics) stage(stage, outcome string, d time.Duration) {
	if m == nil {
		return
	}
	m.stageSeconds.WithLabelValues(stage, outcome).Observe(d.Seconds())
}

func (m *Metrics) degraded(reason string) {
	if m == nil {
		return
	}
	m.degradations.WithLabelValues(reason).Inc()
}

func (m *Metrics) llmStartLeft(d time.Duration) {
	if m == nil {
		return
	}
	m.llmStartLeftSec.Observe(d.Seconds())
}
