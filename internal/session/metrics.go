package session

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/voiced/voiced/internal/cancel"
	"github.com/voiced/voiced/internal/pipeline"
	"github.com/voiced/voiced/internal/protocol"
	"github.com/voiced/voiced/internal/vad"
)

// Metrics are the session layer's Prometheus collectors.
type Metrics struct {
	sessions      prometheus.Gauge
	sessionsTotal *prometheus.CounterVec // by outcome: accepted, refused_full, refused_auth, refused_shutdown, refused_saturated, refused_protocol, refused_upgrade, refused_resume, refused_unauthenticated (phone calls waiting for a token), refused_signature (phone calls without Twilio's signature), refused_client_limit (the client holds -max-sessions-per-client: 429)
	inFlight      prometheus.Gauge
	terminals     *prometheus.CounterVec // by type (result, error) and code
	cancellations *prometheus.CounterVec // by cause
	cancelSeconds *prometheus.HistogramVec
	e2eSeconds    *prometheus.HistogramVec
	slackSeconds  prometheus.Histogram
	late          prometheus.Counter
	badInput      *prometheus.CounterVec // by code
	frames        prometheus.Counter
	slowClients   prometheus.Counter
	overloaded    *prometheus.CounterVec // by cause
	idleCloses    prometheus.Counter
	// twilioDupMedia: media messages a phone call received twice (Twilio
	// resent them), dropped.
	twilioDupMedia prometheus.Counter
	firstAudio     prometheus.Histogram
	// cancelToTerminal: from a client's cancel read to the cancelled
	// request's terminal message written.
	cancelToTerminal prometheus.Histogram
	// refusal: from a refused request's first frame read to its
	// overloaded written.
	refusal prometheus.Histogram
	// missedKept and replayed: terminals kept for a resume, and sent to
	// resumed sessions.
	missedKept, replayed prometheus.Counter
	// historyUnsaved: results sent before their history was durable.
	historyUnsaved prometheus.Counter
	// turnsHeld: server turns that waited past silenceMs because their
	// words were unfinished (holdMs); turnsHeldResumed: those in which
	// speech came back within the hold, the same turn going on.
	turnsHeld, turnsHeldResumed prometheus.Counter
	// memReturns and memReturnCPU: memory returned to the system after a
	// burst of upgrades, and the process CPU time meanwhile.
	memReturns, memReturnCPU prometheus.Counter
	// buffered is the audio budget of the server these metrics serve,
	// read by the buffered-audio gauge; nil until the server sets it.
	buffered atomic.Pointer[pipeline.AudioBudget]
}

// bufferedAudio points the buffered-audio gauge at the server's budget; a
// Server calls it once.
func (m *Metrics) bufferedAudio(b *pipeline.AudioBudget) { m.buffered.Store(b) }

// bufferedBytes is the gauge's value: the audio waiting for a recognizer.
func (m *Metrics) bufferedBytes() float64 {
	if b := m.buffered.Load(); b != nil {
		return float64(b.Used())
	}
	return 0
}

// NewMetrics creates the session collectors and registers them on reg
// (when reg is not nil).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		sessions: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "voiced", Name: "sessions", Help: "Open sessions.",
		}),
		sessionsTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "voiced", Name: "session_upgrades_total",
			Help: "Session upgrade attempts by outcome.",
		}, []string{"outcome"}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "voiced", Name: "requests_in_flight", Help: "Requests accepted and not yet ended.",
		}),
		terminals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "voiced", Name: "requests_total",
			Help: "Requests ended, by terminal message type and error code (code is empty for results).",
		}, []string{"type", "code"}),
		cancellations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "voiced", Name: "cancellations_total",
			Help: "Requests cancelled before completion, by cause.",
		}, []string{"cause"}),
		cancelSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "voiced", Name: "cancel_latency_seconds",
			Help: "From the event that ends a request early (cancel or replacing message read, " +
				"disconnect, deadline timer) to its context being seen done by a waiting goroutine, by cause.",
			Buckets: []float64{.00001, .00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1},
		}, []string{"cause"}),
		e2eSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "voiced", Name: "request_duration_seconds",
			Help:    "From the final audio frame's arrival to the terminal message, by terminal type.",
			Buckets: []float64{.01, .025, .05, .1, .2, .3, .5, .75, 1, 1.25, 1.5, 1.7, 2, 3},
		}, []string{"type"}),
		slackSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "voiced", Name: "deadline_slack_seconds",
			Help:    "Time left before the request deadline when its terminal message was written to the connection.",
			Buckets: []float64{0, .005, .01, .025, .05, .1, .2, .4, .8, 1.2, 1.7},
		}),
		late: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "voiced", Name: "late_terminals_total",
			Help: "Terminal messages written to the connection after their request's deadline (should stay 0).",
		}),
		badInput: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "voiced", Name: "bad_input_total",
			Help: "Inbound messages refused, by error code.",
		}, []string{"code"}),
		frames: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "voiced", Name: "audio_frames_total", Help: "Audio frames that passed validation and were handed to a request's recognizer queue.",
		}),
		slowClients: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "voiced", Name: "slow_client_closes_total",
			Help: "Sessions closed because the client stopped reading and the outbound queue filled.",
		}),
		overloaded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "voiced", Name: "overloaded_total",
			Help: "Requests refused or ended with overloaded, by cause: in_flight_limit, audio_buffer_full, " +
				"no_recognizer, upstream, saturated.",
		}, []string{"cause"}),
		idleCloses: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "voiced", Name: "idle_closes_total",
			Help: "Sessions closed for sending no whole message for -idle-timeout.",
		}),
		twilioDupMedia: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "voiced", Name: "twilio_duplicate_media_total",
			Help: "Media messages of phone calls that Twilio sent again (same chunk), dropped.",
		}),
		firstAudio: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "voiced", Name: "time_to_first_audio_seconds",
			Help:    "From a request's final audio frame's arrival to its first answer.audio written to the connection (speech on).",
			Buckets: []float64{.025, .05, .075, .1, .15, .2, .3, .4, .6, .8, 1, 1.5},
		}),
		cancelToTerminal: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "voiced", Name: "cancel_to_terminal_seconds",
			Help:    "From a client's cancel message read to the cancelled request's terminal message written.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, 1},
		}),
		refusal: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "voiced", Name: "refusal_seconds",
			Help:    "From a refused request's first frame read to its overloaded error written (saturated, in-flight limit).",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, 1},
		}),
		missedKept: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "voiced", Name: "missed_terminals_total",
			Help: "Terminal messages of requests that ended after their connection dropped, kept for a resumed session.",
		}),
		replayed: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "voiced", Name: "replayed_terminals_total",
			Help: "Kept terminal messages sent to a resumed session right after its session.ready.",
		}),
		historyUnsaved: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "voiced", Name: "history_not_durable_total",
			Help: "Results sent before the conversation store had their turn's history: it was away, or its write ran out of time (the request's deadline less the terminal margin; with Redis also -redis.budget).",
		}),
		turnsHeld: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "voiced", Name: "turns_held_total",
			Help: "Server turns that waited past silenceMs, up to holdMs more, because the words recognised up to their end of speech were unfinished.",
		}),
		turnsHeldResumed: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "voiced", Name: "turns_held_resumed_total",
			Help: "Held server turns (voiced_turns_held_total) in which speech resumed within the hold, continuing the same turn.",
		}),
		memReturns: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "voiced", Name: "memory_returns_total",
			Help: "Collections run to return the memory freed by a burst of upgrades to the system, once no session was admitted for -return-memory-after.",
		}),
		memReturnCPU: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "voiced", Name: "memory_return_cpu_seconds_total",
			Help: "Process CPU time while memory was returned after bursts of upgrades (voiced_memory_returns_total); includes other work running meanwhile.",
		}),
	}
	for _, c := range overloadCauses {
		m.overloaded.WithLabelValues(c)
	}
	for _, c := range cancel.Causes {
		m.cancellations.WithLabelValues(c.Name())
	}
	for _, c := range protocol.Codes {
		m.terminals.WithLabelValues(protocol.TypeError, string(c))
	}
	m.terminals.WithLabelValues(protocol.TypeResult, "")
	buffered := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: "voiced", Name: "buffered_audio_bytes",
		Help: "Audio received and waiting for a recognizer, all sessions together (limit: -max-buffered-audio).",
	}, m.bufferedBytes)
	if reg != nil {
		reg.MustRegister(buffered, m.sessions, m.sessionsTotal, m.inFlight, m.terminals, m.cancellations, m.cancelSeconds,
			m.e2eSeconds, m.slackSeconds, m.late, m.badInput, m.frames, m.slowClients, m.overloaded, m.idleCloses, m.twilioDupMedia, m.cancelToTerminal, m.refusal, m.firstAudio, m.missedKept, m.replayed, m.historyUnsaved,
			m.memReturns, m.memReturnCPU, m.turnsHeld, m.turnsHeldResumed)
	}
	return m
}

// countHolds counts a server turn's holds, ev its SpeechStopped: once if
// it was held (vad.Config.HoldMs), and once more if speech resumed in a
// hold, however many it waited through.
func (m *Metrics) countHolds(ev vad.Event) {
	if ev.Holds > 0 {
		m.turnsHeld.Inc()
	}
	if ev.Resumed > 0 {
		m.turnsHeldResumed.Inc()
	}
}
