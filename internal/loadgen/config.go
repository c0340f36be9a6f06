// Package loadgen is the engine of voiceload: it opens many protocol v1
// sessions against a voiced server, sends utterances as paced 20 ms audio
// frames under per-request deadlines, mixes in cancels, replacements,
// barge-ins and disconnects, and checks every terminal message against
// the protocol's promises (exactly one terminal message per request, none
// after the deadline) and against the run's plan (error codes other than
// the cancellations it made and deadline_exceeded count against
// Config.MaxErrorShare). It speaks the protocol only through the
// reference client (package client). A session the server closes is
// re-dialled by the run, or, with Config.Resume, resumed by the client
// (the report then checks that each missed terminal message is replayed
// exactly once). Run is the whole
// load test; cmd/voiceload wraps it in flags.
package loadgen

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/netip"
	"slices"
	"strings"
	"time"
)

// Config configures a load run. The zero value means the documented
// defaults, except that the target must be loopback or listed in
// AllowAddrs. Negative values are refused, except Think's.
type Config struct {
	// Addr is the server's host:port. Default 127.0.0.1:8080.
	Addr string
	// Path is the session endpoint. Default /v1/session.
	Path string
	// AllowAddrs lists host:port targets allowed although not loopback.
	// A load test against someone else's server is an attack; voiceload
	// refuses any target that is neither loopback nor listed here.
	AllowAddrs []string
	// resumeTimeout, for tests, replaces the 15 s a turn waits for its
	// session to be back (0: resumeTimeout).
	resumeTimeout time.Duration
	// Token, when set, is sent as "Authorization: Bearer"; voiced needs
	// one on non-loopback addresses. It never appears in the report or
	// in logs.
	Token string

	// Sessions is the number of concurrent sessions. Default 10.
	Sessions int
	// Duration bounds the time new requests are started; requests in
	// flight then finish. Default 30 s.
	Duration time.Duration
	// Requests bounds the number of requests started; 0 means no bound.
	Requests int
	// Rate, when positive, makes the run open-loop: requests arrive at
	// this many per second (Poisson), spread over the sessions, whether
	// or not earlier ones are done. When 0, each session runs
	// request, wait for its end, think, repeat (closed loop).
	Rate float64
	// Think is the mean pause between a session's turns in closed loop;
	// each pause is uniform in [Think/2, 3*Think/2]. Default 1 s;
	// negative means no pause.
	Think time.Duration
	// Ramp spreads the sessions' first turns, and so their connections,
	// at random over this long from the start (closed loop). Default: a
	// think time plus an utterance, which keeps sessions from speaking in
	// step but opens them all within a few seconds; a longer ramp keeps
	// the start of a run with thousands of sessions from being a storm of
	// upgrades.
	Ramp time.Duration
	// Fast sends frames as fast as possible instead of in real time.
	Fast bool
	// Speech asks for spoken answers (session.update speech, binary
	// answer.audio at 16 kHz): the report then gives the time to first
	// audio and the audio per request, and checks answer.audio's order
	// (seq without gaps, one final, all before the terminal).
	Speech bool
	// Budget is each request's deadline: deadlineAt = server time when
	// the frame is sent + Budget, on the server's clock as aligned by
	// session.ready and ping/pong. Default and cap: the server's
	// maxBudgetMs.
	Budget time.Duration
	// Mix sets the share of turns that exercise cancellation paths.
	Mix Mix
	// Turns is who finds the ends of utterances: TurnsClient (the
	// default: each utterance is a request ending with final:true) or
	// TurnsServer (each session streams audio continuously, utterances
	// with gaps of silence between them (Think), and the server's turn
	// detection makes the requests; every detected turn must get exactly
	// one terminal message, in time, and as many turns must be detected
	// as utterances were sent).
	Turns string
	// MuLaw sends the audio as 8 kHz G.711 μ-law (session.update
	// encoding mulaw), resampled from the utterances.
	MuLaw bool
	// Resume keeps a session across a connection the server drops (an
	// instance killed, or drained with 1012): the client reconnects with
	// its resume token and the session continues, and the report gives
	// the resume times, the missed terminal messages replayed (each must
	// come exactly once) and the requests lost with a killed instance
	// (Report.Resume). Without it such a session is re-dialled as a new
	// one. Closed loop with client turns only.
	Resume bool
	// Idle opens the sessions and sends nothing (after the clock-sync
	// pings) until Duration ends: it measures the memory an idle session
	// costs the server.
	Idle bool

	// WAVs are utterances to send, one chosen at random per turn: 16-bit
	// PCM mono WAV files at a sample rate protocol v1 supports.
	// Without them each utterance is Synthetic long, a tone in noise.
	WAVs []string
	// Synthetic is the length of the generated utterance. Default 1.5 s.
	Synthetic time.Duration

	// Grace is how long after a request's deadline its terminal message
	// is waited for before it is counted missing. Default 1 s.
	Grace time.Duration
	// LateTolerance is how late a terminal message may arrive after the
	// deadline, as seen by the client, before it counts as a violation.
	// The client sees the message after loopback transit and its own
	// scheduling delay, so its view can only be later than the server's.
	// Default 0: every late arrival is a violation.
	LateTolerance time.Duration
	// MaxErrorShare is the percentage of terminated requests that may end
	// with an error code the run did not plan for before the run fails.
	// Planned are cancelled for cancel turns, replaced for replace and
	// barge-in turns, and deadline_exceeded for any request (the client
	// chose the budget; whether the answer came in time is the late
	// check). Anything else (overloaded, unavailable, internal, bad_audio,
	// ...) is unplanned. Default 0: every unplanned error fails the run.
	MaxErrorShare float64
	// Shedding plans for overloaded: the run drives the server past what
	// it can serve in time, and refusing the excess (fast: the refusal
	// distribution) is what it measures.
	Shedding bool
	// MetricsURL is the server's Prometheus endpoint, scraped during the
	// run. Default http://Addr/metrics; "off" disables scraping.
	MetricsURL string
	// ScrapeEvery is the scrape interval. Default 1 s.
	ScrapeEvery time.Duration
	// Progress receives a progress line every ProgressEvery (default 1 s);
	// nil means no progress lines.
	Progress      io.Writer
	ProgressEvery time.Duration
	// Seed seeds the random choices; 0 seeds from the clock.
	Seed uint64
	// Logger logs sessions that fail; default discards.
	Logger *slog.Logger
}

// Mix gives, in percent of turns, how often each cancellation path is
// exercised. The rest of the turns are plain requests. The shares must
// add up to at most 100.
type Mix struct {
	// Cancel: a cancel message while the request runs.
	Cancel float64 `json:"cancel"`
	// Replace: the same requestId re-sent after its final frame; the old
	// request should end with replaced and the new one run.
	Replace float64 `json:"replace"`
	// BargeIn: session.update supersede, then a new request while the
	// previous one runs; the previous should end with replaced.
	BargeIn float64 `json:"bargeIn"`
	// Disconnect: the connection dropped mid-request, then a new session.
	Disconnect float64 `json:"disconnect"`
}

func (m Mix) total() float64 { return m.Cancel + m.Replace + m.BargeIn + m.Disconnect }

// Errors returned by Run for a bad configuration.
var (
	ErrNotLoopback = errors.New("target is not a loopback address; list it in -allow-addr to load-test it")
	ErrConfig      = errors.New("bad load configuration")
)

// Defaults of Config, shared by withDefaults and the flags.
const (
	defaultAddr      = "127.0.0.1:8080"
	defaultPath      = "/v1/session"
	defaultSessions  = 10
	defaultDuration  = 30 * time.Second
	defaultThink     = time.Second
	defaultUtterance = 1500 * time.Millisecond
	defaultGrace     = time.Second
)

func (c Config) withDefaults() Config {
	if c.Addr == "" {
		c.Addr = defaultAddr
	}
	if c.Path == "" {
		c.Path = defaultPath
	}
	if c.Sessions == 0 {
		c.Sessions = defaultSessions
	}
	if c.Duration == 0 {
		c.Duration = defaultDuration
	}
	switch {
	case c.Think == 0:
		c.Think = defaultThink
	case c.Think < 0:
		c.Think = 0
	}
	if c.Synthetic == 0 {
		c.Synthetic = defaultUtterance
	}
	if c.Grace == 0 {
		c.Grace = defaultGrace
	}
	if c.MetricsURL == "" {
		c.MetricsURL = "http://" + c.Addr + "/metrics"
	}
	if c.ScrapeEvery == 0 {
		c.ScrapeEvery = time.Second
	}
	if c.ProgressEvery == 0 {
		c.ProgressEvery = time.Second
	}
	if c.Seed == 0 {
		c.Seed = uint64(time.Now().UnixNano())
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	c.WAVs = slices.Clone(c.WAVs)
	c.AllowAddrs = slices.Clone(c.AllowAddrs)
	return c
}

func (c Config) validate() error {
	if err := checkTarget(c.Addr, c.AllowAddrs); err != nil {
		return err
	}
	// Written so that NaN fails them: it passes every "< 0" and "> 100".
	if c.Requests < 0 || !(c.Rate >= 0) || math.IsInf(c.Rate, 0) || c.Budget < 0 || c.LateTolerance < 0 || c.Ramp < 0 {
		return fmt.Errorf("%w: -requests, -rate, -budget, -late-tolerance and -ramp must not be negative (and -rate finite)", ErrConfig)
	}
	if c.Sessions < 0 || c.Duration < 0 || c.Grace < 0 || c.Synthetic < 0 || c.ScrapeEvery < 0 || c.ProgressEvery < 0 {
		return fmt.Errorf("%w: -sessions, -duration, -grace and -utterance must not be negative", ErrConfig)
	}
	if !(c.MaxErrorShare >= 0 && c.MaxErrorShare <= 100) {
		return fmt.Errorf("%w: -max-error-share %g: want a percentage from 0 to 100", ErrConfig, c.MaxErrorShare)
	}
	m := c.Mix
	if !(m.Cancel >= 0 && m.Replace >= 0 && m.BargeIn >= 0 && m.Disconnect >= 0 && m.total() <= 100) {
		return fmt.Errorf("%w: mix shares must be percentages adding up to at most 100, got %+v", ErrConfig, m)
	}
	if c.Rate > 0 && m.BargeIn > 0 {
		// Open-loop turns overlap on a session, and supersede is the
		// session's: the other turns' requests would end "replaced", which
		// they do not plan for.
		return fmt.Errorf("%w: -barge-in switches supersede on for the whole session, whose other open-loop (-rate) turns it would replace", ErrConfig)
	}
	switch c.Turns {
	case "", TurnsClient:
	case TurnsServer:
		if c.Rate > 0 || c.Idle || m.total() > 0 || c.Fast {
			return fmt.Errorf("%w: -turns server streams continuously in closed loop: it takes no -rate, -idle, -fast or cancellation mix", ErrConfig)
		}
	default:
		return fmt.Errorf("%w: -turns %q: want client or server", ErrConfig, c.Turns)
	}
	if c.Ramp > 0 && (c.Rate > 0 || c.Idle || c.Turns == TurnsServer) {
		return fmt.Errorf("%w: -ramp spreads the first turns of closed-loop client-turn sessions: no -rate, -idle or -turns server", ErrConfig)
	}
	if c.Ramp >= c.Duration {
		return fmt.Errorf("%w: -ramp %v must be shorter than -duration %v, or some sessions never start", ErrConfig, c.Ramp, c.Duration)
	}
	if c.Resume && (c.Rate > 0 || c.Idle || c.Turns == TurnsServer) {
		return fmt.Errorf("%w: -resume runs closed loop with client turns: no -rate, -idle or -turns server", ErrConfig)
	}
	if !strings.HasPrefix(c.Path, "/") {
		return fmt.Errorf("%w: path %q must start with /", ErrConfig, c.Path)
	}
	return nil
}

// checkTarget refuses a target that is neither loopback nor allowed.
// Host names other than localhost are not resolved: a name is allowed
// only by listing it, so a DNS answer cannot redirect the load.
func checkTarget(addr string, allow []string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || port == "" {
		return fmt.Errorf("%w: target %q is not host:port", ErrConfig, addr)
	}
	if slices.Contains(allow, addr) {
		return nil
	}
	if host == "localhost" {
		return nil
	}
	if ip, err := netip.ParseAddr(host); err == nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("%w: %s", ErrNotLoopback, addr)
}

// RegisterFlags registers voiceload's flags on fs, bound to c.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.Addr, "addr", defaultAddr, "server host:port (loopback unless listed in -allow-addr)")
	fs.StringVar(&c.Path, "path", defaultPath, "session endpoint path")
	fs.Func("allow-addr", "allow this non-loopback host:port as a target (repeatable, or comma-separated)", func(s string) error {
		for a := range strings.SplitSeq(s, ",") {
			if a = strings.TrimSpace(a); a != "" {
				c.AllowAddrs = append(c.AllowAddrs, a)
			}
		}
		return nil
	})
	fs.IntVar(&c.Sessions, "sessions", defaultSessions, "concurrent sessions")
	fs.DurationVar(&c.Duration, "duration", defaultDuration, "how long to start new requests")
	fs.IntVar(&c.Requests, "requests", 0, "stop after starting this many requests (0: no limit)")
	fs.Float64Var(&c.Rate, "rate", 0, "open loop: requests per second arriving over all sessions (0: closed loop)")
	c.Think = defaultThink
	fs.Func("think", "closed loop: mean think time between a session's turns, uniform in [think/2, 3*think/2]; 0 for none (default 1s)", func(s string) error {
		d, err := time.ParseDuration(s)
		if err != nil {
			return err
		}
		if d <= 0 {
			d = -1 // Config's "none": its zero means the default
		}
		c.Think = d
		return nil
	})
	fs.DurationVar(&c.Ramp, "ramp", 0, "closed loop: spread the sessions' first turns, and their connections, over this long (default: a think time plus an utterance)")
	fs.BoolVar(&c.Fast, "fast", false, "send audio frames as fast as possible instead of in real time")
	fs.BoolVar(&c.Speech, "speech", false, "ask for spoken answers (binary answer.audio, 16 kHz); report time to first audio and audio per request, and check answer.audio's order")
	fs.DurationVar(&c.Budget, "budget", 0, "deadline budget per request, after each frame is sent (default and cap: the server's maxBudgetMs)")
	fs.Float64Var(&c.Mix.Cancel, "cancel", 0, "percent of turns that cancel the request while it runs")
	fs.Float64Var(&c.Mix.Replace, "replace", 0, "percent of turns that re-send a requestId after its final frame (replacement)")
	fs.Float64Var(&c.Mix.BargeIn, "barge-in", 0, "percent of turns that barge in: supersede on, then a new request while one runs")
	fs.Float64Var(&c.Mix.Disconnect, "disconnect", 0, "percent of turns that drop the connection mid-request")
	fs.StringVar(&c.Turns, "turns", TurnsClient, "who ends utterances: client (final:true per request) or server (continuous audio with gaps of -think silence; "+
		"the server's turn detection makes the requests; one terminal per detected turn, none late, as many turns as utterances)")
	fs.BoolVar(&c.MuLaw, "mulaw", false, "send audio as 8 kHz G.711 mu-law (session.update encoding mulaw)")
	fs.BoolVar(&c.Resume, "resume", false, "when the server drops a session (instance killed, or drained: 1012), reconnect with its resume token and continue; "+
		"report resume times, replayed terminals (each exactly once) and requests lost with a killed instance")
	fs.BoolVar(&c.Idle, "idle", false, "open the sessions and send nothing until -duration ends, to measure the server's memory per idle session")
	fs.Func("wav", "utterance WAV file, 16-bit PCM, channels mixed down to mono (repeatable: one at random per turn; default: a synthetic utterance)", func(s string) error {
		c.WAVs = append(c.WAVs, s)
		return nil
	})
	fs.DurationVar(&c.Synthetic, "utterance", defaultUtterance, "length of the synthetic utterance")
	fs.DurationVar(&c.Grace, "grace", defaultGrace, "how long after its deadline a terminal message is waited for before it counts missing")
	fs.DurationVar(&c.LateTolerance, "late-tolerance", 0, "terminal messages arriving later than this after the deadline are violations")
	fs.Float64Var(&c.MaxErrorShare, "max-error-share", 0, "percent of terminated requests that may end with an error code the run did not plan for "+
		"(overloaded, unavailable, internal, ...; planned: cancelled and replaced from -cancel, -replace and -barge-in, and deadline_exceeded) before the run fails")
	fs.BoolVar(&c.Shedding, "shedding", false, "plan for overloaded: the run drives the server past its capacity to measure how it refuses the excess")
	fs.StringVar(&c.MetricsURL, "metrics-url", "", `server metrics URL (default http://<addr>/metrics; "off" disables)`)
	fs.Uint64Var(&c.Seed, "seed", 0, "random seed (0: from the clock)")
}
