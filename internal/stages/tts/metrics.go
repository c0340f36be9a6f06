package tts

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the engine's Prometheus collectors. Labels come from fixed
// sets or configuration (engine and voice names, error kinds), never
// from text.
type metrics struct {
	rtf        *prometheus.HistogramVec // engine, voice
	firstChunk *prometheus.HistogramVec // engine
	chunks     *prometheus.CounterVec   // engine
	audio      *prometheus.CounterVec   // engine
	failures   *prometheus.CounterVec   // engine, kind
	fallbacks  *prometheus.CounterVec   // from, kind
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		rtf: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "voiced_tts_real_time_factor",
			Help:    "Synthesis time over audio length of complete syntheses (0.05: 20 times faster than real time).",
			Buckets: []float64{.005, .01, .02, .03, .05, .075, .1, .2, .5, 1, 2}}, []string{"engine", "voice"}),
		firstChunk: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "voiced_tts_first_chunk_seconds",
			Help:    "Time from the start of a synthesis to its first audio chunk.",
			Buckets: []float64{.005, .01, .025, .05, .075, .1, .15, .2, .3, .5, 1}}, []string{"engine"}),
		chunks: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "voiced_tts_chunks_total",
			Help: "Audio chunks emitted."}, []string{"engine"}),
		audio: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "voiced_tts_audio_seconds_total",
			Help: "Audio emitted, in seconds."}, []string{"engine"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "voiced_tts_failures_total",
			Help: "Syntheses that failed, by error kind (canceled is the caller's own cancellation)."}, []string{"engine", "kind"}),
		fallbacks: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "voiced_tts_fallbacks_total",
			Help: "Sentences the remote engine did not speak and the embedded one did, by the kind that caused it (cooldown: the remote engine was skipped after a recent failure)."}, []string{"from", "kind"}),
	}
	if reg == nil {
		return m, nil
	}
	var errs []error
	for _, c := range []prometheus.Collector{m.rtf, m.firstChunk, m.chunks, m.audio, m.failures, m.fallbacks} {
		errs = append(errs, reg.Register(c))
	}
	return m, errors.Join(errs...)
}
