package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/voiced/voiced/internal/deadline"
	"github.com/voiced/voiced/internal/pipeline"
	"github.com/voiced/voiced/internal/saturation"
	"github.com/voiced/voiced/internal/session"
	"github.com/voiced/voiced/internal/stages/llm"
	"github.com/voiced/voiced/internal/stages/sim"
	"github.com/voiced/voiced/internal/stages/stt"
	"github.com/voiced/voiced/internal/stages/stt/sphinx"
	"github.com/voiced/voiced/internal/stages/tts"
)

// config is everything the flags set.
type config struct {
	addr            string
	adminAddr       string
	insecureNoAuth  bool
	logFormat       string
	logLevel        string
	shutdownTimeout time.Duration
	stages          string
	pipeline        pipeline.Config
	session         session.Config
	sim             sim.Config
	shed            saturation.Config
	engines         engineFlags
	fleet           fleetFlags
	version         bool
}

const usageHeader = `Usage: voiced [flags]

voiced serves real-time voice sessions (protocol voiced.v1) at ws://ADDR/v1/session
and phone calls (Twilio Media Streams) at ws://ADDR/v1/twilio, /healthz,
/readyz and the browser demo at /; Prometheus metrics at /metrics on
-admin-addr, and on -addr too only while it is loopback without tokens.
Environment: VOICED_ADDR (default for -addr), VOICED_TOKENS (comma-separated
bearer tokens, added to -auth-token), OPENAI_API_KEY, ANTHROPIC_API_KEY,
GEMINI_API_KEY (enable those LLM providers), OPENAI_BASE_URL,
ANTHROPIC_BASE_URL, GOOGLE_GEMINI_BASE_URL (their base URLs, when the
-llm.*.base-url flags are not set), VOICED_REDIS_URL (-redis),
VOICED_RESUME_SECRET (-resume-secret), VOICED_TWILIO_AUTH_TOKEN
(-twilio.auth-token).

Flags:
`

func parseFlags(args []string, getenv func(string) string, stderr io.Writer) (*config, error) {
	c := &config{}
	fs, tokens, origins := newFlagSet(c, getenv, stderr)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		// Not quoted: flags end at the first argument that is not one, so
		// what follows a mistake (a boolean flag given a separate value,
		// "-log-transcripts false") is every later flag, -auth-token,
		// -resume-secret or a -redis URL with its password among them.
		return nil, fmt.Errorf("unexpected argument(s): %d after the last flag, beginning at argument %d "+
			"(flags end at the first non-flag; a boolean flag takes its value as -name=value)", fs.NArg(), len(args)-fs.NArg()+1)
	}
	c.session.Tokens = append(splitList(*tokens), splitList(getenv("VOICED_TOKENS"))...)
	c.session.OriginPatterns = splitList(*origins)
	c.engines.fromEnv(getenv)
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	c.fleet.fromEnv(getenv, set)
	if !set["twilio.auth-token"] {
		c.session.TwilioAuthToken = getenv("VOICED_TWILIO_AUTH_TOKEN")
	}
	if c.engines.tts.Engine == speechOff {
		// Warned of at the start (buildSpeech), not refused: turning
		// speech off, say while its engine misbehaves, is one flag
		// added, as -stages sim leaves the engines' flags alone.
		for name := range set {
			if strings.HasPrefix(name, "tts.") && name != "tts.engine" {
				c.engines.speechIgnored = append(c.engines.speechIgnored, "-"+name)
			}
		}
		slices.Sort(c.engines.speechIgnored)
	}
	if c.stages != "real" && c.stages != "sim" {
		return nil, fmt.Errorf("-stages %q: want real or sim", c.stages)
	}
	if err := c.validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// validate refuses negative sizes and durations, which would otherwise
// panic deep in a session or silently disable a limit.
func (c *config) validate() error {
	for _, check := range []func() error{c.validateBudgets, c.validateEngines, c.validateListeners} {
		if err := check(); err != nil {
			return err
		}
	}
	return nil
}

// validateBudgets checks the session's and the pipeline's numbers: none
// negative, and budgets in which every stage can start.
func (c *config) validateBudgets() error {
	p, s := &c.pipeline, &c.session
	for name, d := range map[string]time.Duration{
		"max-budget": s.MaxBudget, "reserve": p.Reserve, "terminal-margin": s.TerminalMargin,
		"stt.cap": p.STT.Cap, "stt.min": p.STT.Min, "intent.cap": p.Intent.Cap, "intent.min": p.Intent.Min,
		"retrieval.cap": p.Retrieval.Cap, "retrieval.min": p.Retrieval.Min, "llm.cap": p.LLM.Cap, "llm.min": p.LLM.Min,
		"tts.cap": p.TTS.Cap, "tts.min": p.TTS.Min,
		"partial-interval": p.PartialInterval, "max-audio": s.MaxAudioPerRequest, "write-timeout": s.WriteTimeout,
		"shutdown-timeout": c.shutdownTimeout, "max-terminal-margin": s.MaxTerminalMargin, "shed.lag-window": c.shed.LagWindow,
	} {
		if d < 0 {
			return fmt.Errorf("-%s %v: must not be negative", name, d)
		}
	}
	for name, n := range map[string]int64{
		"max-sessions": int64(s.MaxSessions), "max-message-bytes": s.MaxMessageBytes, "max-in-flight": int64(s.MaxInFlight),
		"outbound-queue": int64(s.OutboundQueue), "max-buffered-audio": s.MaxBufferedAudio, "retrieval.top-k": int64(p.TopK),
		"max-sessions-per-client": int64(s.MaxSessionsPerClient),
	} {
		if n < 0 {
			return fmt.Errorf("-%s %d: must not be negative", name, n)
		}
	}
	// A stage whose minimum is above its cap never starts: every request
	// would end deadline_exceeded (STT) or unspoken (speech).
	d := p.WithDefaults()
	for _, st := range []struct {
		name string
		s    deadline.Stage
	}{{"stt", d.STT}, {"intent", d.Intent}, {"retrieval", d.Retrieval}, {"llm", d.LLM}, {"tts", d.TTS}} {
		if st.s.Min > st.s.Cap {
			return fmt.Errorf("-%s.min %v is above -%s.cap %v: the stage would never start", st.name, st.s.Min, st.name, st.s.Cap)
		}
	}
	// The same with the request's whole budget: STT, the first stage,
	// could never start.
	if mb := s.WithDefaults().MaxBudget; mb < d.Reserve+d.STT.Min {
		return fmt.Errorf("-max-budget %v is less than -reserve %v plus -stt.min %v: no request's STT could ever start (0 means the default of each)", mb, d.Reserve, d.STT.Min)
	}
	if n := s.MaxMessageBytes; n > 0 && n < minMessageBytes {
		// Every audio frame would close its session with 1009.
		return fmt.Errorf("-max-message-bytes %d: must be at least %d, room for a client's 20 ms audio frame (0 means the default, 256 KiB)", n, minMessageBytes)
	}
	if q := s.OutboundQueue; q > 0 && q < session.MinOutboundQueue {
		return fmt.Errorf("-outbound-queue %d: must be at least %d, room for the terminals a resumed session is handed at once (0 means the default, 64)", q, session.MinOutboundQueue)
	}
	// 0 means the default for both (session.Config, pipeline.Config):
	// compare what the server will run with.
	margin, reserve := s.WithDefaults().TerminalMargin, p.WithDefaults().Reserve
	if margin >= reserve {
		return fmt.Errorf("-terminal-margin %v must be less than -reserve %v (0 means the default of each)", margin, reserve)
	}
	return nil
}

// validateEngines checks the engines' settings that would otherwise fail
// only once the engines before them have warmed up.
func (c *config) validateEngines() error {
	if err := c.engines.llm.Validate(); err != nil {
		return err
	}
	if c.stages == "real" {
		if err := c.engines.stt.Validate(); err != nil {
			return err
		}
		if err := c.engines.intent.Validate(); err != nil {
			return err
		}
		if st, n := c.engines.stt, c.engines.intent.Alternatives; (st.Engine == "" || st.Engine == stt.EngineSphinx) &&
			st.Sphinx.NBest == 0 && n > sphinx.MaxNBest {
			// buildStages asks the recogniser for as many hypotheses,
			// which it refuses once the other engines have warmed up.
			return fmt.Errorf("-intent.alternatives %d: the embedded recogniser reports at most %d (or set -stt.nbest)", n, sphinx.MaxNBest)
		}
		if d := c.engines.domainDir; d != "" {
			// Checked here as well, so that it is refused as a usage
			// error (exit status 2), naming the flag.
			fi, err := os.Stat(d)
			switch {
			case err != nil:
				return fmt.Errorf("-domain: %w", err)
			case !fi.IsDir():
				return fmt.Errorf("-domain %s: not a directory", d)
			}
		}
		if n := c.engines.retrieval.MaxConns; n < 0 {
			return fmt.Errorf("-retrieval.max-conns %d: must not be negative", n)
		}
		if p := c.engines.retrieval.Path; p != "" {
			// SQLite would say only "unable to open database file", once
			// the classifier is trained.
			if _, err := os.Stat(filepath.Dir(p)); err != nil {
				return fmt.Errorf("-retrieval.index %s: %w", p, err)
			}
			if fi, err := os.Stat(p); err == nil && fi.IsDir() {
				return fmt.Errorf("-retrieval.index %s: is a directory, not a file", p)
			}
		}
	}
	if e := c.engines.tts.Engine; e != "" && e != speechOff && !slices.Contains(tts.Engines(), e) {
		return fmt.Errorf("-tts.engine %q: want %s or %s", e, strings.Join(tts.Engines(), ", "), speechOff)
	}
	if c.engines.tts.Engine != speechOff {
		if err := c.engines.tts.Validate(); err != nil {
			return err
		}
	}
	if n := c.engines.tts.Flite.Parallel; n < 0 {
		return fmt.Errorf("-tts.parallel %d: must not be negative (0: one per CPU)", n)
	}
	if err := c.sim.Validate(); err != nil {
		return err
	}
	if v := c.engines.llm.MaxCostPerTenantDay; v > 0 && len(c.session.Tokens) == 0 && c.session.TwilioAuthToken == "" {
		// Accepted, it would cap nothing: without tokens no request has
		// a tenant.
		return fmt.Errorf("-llm.max-cost-per-tenant-day %v needs -auth-token (or VOICED_TOKENS) or -twilio.auth-token: a tenant is an access token (or the Twilio account)", v)
	}
	if v := c.engines.llm.MaxCostPerTenantDay; v > 0 && len(c.session.Tokens) > 0 && c.fleet.redis.URL != "" && c.fleet.resumeSecret == "" {
		// A token's tenant is its keyed hash under the resume secret: a
		// random one per process would count a tenant's spend apart on
		// each instance, and from 0 again after each restart.
		return fmt.Errorf("-llm.max-cost-per-tenant-day %v with -redis needs -resume-secret (or VOICED_RESUME_SECRET), the same on every instance: tenants are named with it, so without it each instance, and each restart, counts a tenant's spend from 0", v)
	}
	if f := c.engines.llm.PricesFile; f != "" {
		// Read now, so a bad table stops voiced before it loads its engines.
		if _, err := llm.LoadPrices(f); err != nil {
			return fmt.Errorf("-llm.prices: %w", err)
		}
	}
	return nil
}

// validateListeners checks the fleet's settings, that each listener has
// its own port, and the URL Twilio reaches the server at.
func (c *config) validateListeners() error {
	if err := c.fleet.validate(&c.session); err != nil {
		return err
	}
	if u := c.session.TwilioPublicURL; u != "" {
		if err := checkPublicURL(u); err != nil {
			return fmt.Errorf("-twilio.public-url %q: %w", u, err)
		}
	}
	// One port for two listeners: the second would fail with "address
	// already in use", as if another process held it.
	for _, l := range []struct{ name, addr string }{{"admin-addr", c.adminAddr}, {"haproxy-agent-addr", c.fleet.agentAddr}} {
		if _, port, err := net.SplitHostPort(l.addr); err == nil && port != "0" && l.addr == c.addr {
			return fmt.Errorf("-%s %s is -addr too: each listener needs its own port", l.name, l.addr)
		}
	}
	return nil
}

// minMessageBytes is the least -max-message-bytes voiced accepts: room for
// the largest message a client must be able to send. That is an audio
// frame of 20 ms of 16 kHz PCM (640 bytes) with the longest header the
// protocol allows (188 bytes: a 64-character requestId, 19-digit
// deadlineAt and seq, sampleRate 48000): 832 bytes as a binary frame, with
// its 4-byte length, and 1,055 as a text message, its audio in base64.
// The largest control message (a session.update with every field, about
// 300 bytes) and Twilio's media events (about 400) are smaller. 2 KiB is
// nearly twice the largest: room for JSON whitespace and for the custom
// parameters an operator puts in Twilio's start event.
const minMessageBytes = 2 << 10

// newFlagSet defines every flag of voiced, writing into c.
func newFlagSet(c *config, getenv func(string) string, stderr io.Writer) (fs *flag.FlagSet, tokens, origins *string) {
	fs = flag.NewFlagSet("voiced", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usageHeader)
		fs.PrintDefaults()
	}
	addr := getenv("VOICED_ADDR")
	if addr == "" {
		addr = "127.0.0.1:8080"
	}
	fs.StringVar(&c.addr, "addr", addr, "`host:port` to listen on (env VOICED_ADDR); a non-loopback address requires -auth-token or -insecure-no-auth")
	tokens, origins = new(string), new(string)
	fs.StringVar(tokens, "auth-token", "", "comma-separated bearer `tokens` clients must present (Authorization: Bearer or ?access_token=); also read from VOICED_TOKENS, preferred: a flag shows in the process list")
	fs.StringVar(&c.adminAddr, "admin-addr", "127.0.0.1:8081", "`host:port` of the operator's listener: /metrics and Go's /debug/pprof/ (no authentication, so loopback unless -insecure-no-auth); off to disable. /metrics is also on -addr while that is loopback without tokens")
	fs.BoolVar(&c.insecureNoAuth, "insecure-no-auth", false, "allow listening on a non-loopback address without auth tokens")
	fs.StringVar(origins, "allowed-origins", "", "comma-separated extra browser `origins` (host patterns) allowed to open sessions; the server's own host is always allowed")
	fs.StringVar(&c.logFormat, "log-format", "auto", "log `format`: auto (tint on a terminal, JSON otherwise), text or json")
	fs.StringVar(&c.logLevel, "log-level", "info", "log `level`: debug, info, warn or error")
	fs.StringVar(&c.session.Greeting, "twilio.greeting", session.DefaultGreeting, "what a phone call through /v1/twilio hears first (\"-\": nothing)")
	// The auth token is read from the environment after the flags, not as
	// its default: a default is printed by -h and by every flag error.
	fs.StringVar(&c.session.TwilioAuthToken, "twilio.auth-token", "", "the Twilio account's auth `token`: a phone call's handshake must then carry Twilio's X-Twilio-Signature (else HTTP 403) and needs no -auth-token (env VOICED_TWILIO_AUTH_TOKEN, preferred: a flag shows in the process list); empty: not checked")
	fs.StringVar(&c.session.TwilioPublicURL, "twilio.public-url", "", "the wss:// `URL` Twilio connects to, as in the TwiML's <Stream url> (wss://HOST/v1/twilio), which Twilio signs and a proxy or tunnel rewrites; empty: rebuilt from the request")
	fs.BoolVar(&c.session.TwilioTrustForwarded, "twilio.trust-forwarded", false, "without -twilio.public-url, take the signed URL's scheme and host from X-Forwarded-Proto and X-Forwarded-Host: only when a proxy that sets them is the only way in")
	fs.BoolVar(&c.session.LogTranscripts, "log-transcripts", false, "log each transcript and answer, at info level (off: speech is personal data)")
	fs.DurationVar(&c.shutdownTimeout, "shutdown-timeout", 10*time.Second, "how long a drain may take before in-flight requests are cancelled (0: no drain, they end unavailable at once)")
	fs.BoolVar(&c.version, "version", false, "print the version (module version, commit, its time, whether modified, Go version) and exit")
	fs.StringVar(&c.stages, "stages", "real", "stage `engines`: real (embedded engines) or sim (simulated latencies, for load tests only)")

	p, s := &c.pipeline, &c.session
	fs.DurationVar(&s.MaxBudget, "max-budget", 1700*time.Millisecond, "longest end-to-end budget after the final frame, whatever deadlineAt asks (0: the default)")
	fs.DurationVar(&p.Reserve, "reserve", 100*time.Millisecond, "time kept back from every stage for sending the final answer (0: the default)")
	fs.DurationVar(&s.TerminalMargin, "terminal-margin", 10*time.Millisecond, "how long before the deadline a request gives up, so its terminal message leaves in time; grown by twice the recent scheduling lag (voiced_sched_lag_seconds) up to -max-terminal-margin (0: the default)")
	fs.DurationVar(&s.MaxTerminalMargin, "max-terminal-margin", 300*time.Millisecond, "most the terminal margin grows to while the process runs late (0: the default; equal to -terminal-margin: it never grows)")
	fs.DurationVar(&p.STT.Cap, "stt.cap", 1200*time.Millisecond, "STT finalisation budget cap (0: the default)")
	fs.DurationVar(&p.STT.Min, "stt.min", 30*time.Millisecond, "least STT budget worth starting with (0: the default)")
	fs.DurationVar(&p.Intent.Cap, "intent.cap", 250*time.Millisecond, "intent stage budget cap (0: the default)")
	fs.DurationVar(&p.Intent.Min, "intent.min", 5*time.Millisecond, "most the intent stage's minimum budget can be; it follows the stage's measured cost (p99 of its last 128 runs) below this (0: the default)")
	fs.DurationVar(&p.Retrieval.Cap, "retrieval.cap", 250*time.Millisecond, "retrieval stage budget cap (0: the default)")
	fs.DurationVar(&p.Retrieval.Min, "retrieval.min", 10*time.Millisecond, "most the retrieval stage's minimum budget can be; it follows the stage's measured cost below this (0: the default)")
	fs.DurationVar(&p.LLM.Cap, "llm.cap", 700*time.Millisecond, "LLM stage budget cap, all providers and retries together (0: the default)")
	fs.DurationVar(&p.LLM.Min, "llm.min", 120*time.Millisecond, "most the LLM stage's minimum budget can be; it follows the stage's measured cost below this (below the minimum the answer is templated; 0: the default)")
	fs.DurationVar(&p.TTS.Cap, "tts.cap", 1500*time.Millisecond, "speech stage budget cap, from the LLM's start (speech runs alongside it; 0: the default)")
	fs.DurationVar(&p.TTS.Min, "tts.min", 30*time.Millisecond, "least speech budget worth starting with; below it speech is skipped (0: the default)")
	fs.IntVar(&p.TopK, "retrieval.top-k", 3, "passages retrieved per request (0: the default)")
	fs.DurationVar(&p.PartialInterval, "partial-interval", 250*time.Millisecond, "least time between two partial transcripts (0: the default)")

	fs.IntVar(&s.MaxSessions, "max-sessions", 10000, "most concurrent sessions; more get HTTP 503 (0: the default)")
	fs.IntVar(&s.MaxSessionsPerClient, "max-sessions-per-client", 0, "most concurrent sessions of one client on this instance: a tenant (access token) with -auth-token, else a client address (see -trusted-proxies); more get HTTP 429; a phone call counts against its token's tenant, or the Twilio account when signed (-twilio.auth-token). 0: no limit, the default: one token may serve a whole application's users and many users share an address (NAT, a proxy), so only the operator can tell how many one client should have")
	fs.Var((*prefixList)(&s.TrustedProxies), "trusted-proxies", "comma-separated `CIDRs` (or addresses) of the proxies in front of voiced (HAProxy's address): a client's address is then the last X-Forwarded-For hop that is not one of them; any other peer's header is ignored. Default none: the peer's address")
	fs.Int64Var(&s.MaxMessageBytes, "max-message-bytes", 256<<10, fmt.Sprintf("largest inbound message in bytes: at least %d, room for a 20 ms audio frame of 16 kHz with its header (0: the default)", minMessageBytes))
	fs.DurationVar(&s.MaxAudioPerRequest, "max-audio", 30*time.Second, "longest utterance accepted per request (0: the default)")
	fs.IntVar(&s.MaxInFlight, "max-in-flight", 4, "most requests in flight per session; more get overloaded (0: the default)")
	fs.IntVar(&s.OutboundQueue, "outbound-queue", 64, "messages queued for a slow client before it is closed with a policy violation (0: the default; at least 32)")
	s.MaxBufferedAudio = 256 << 20
	fs.Var((*byteSize)(&s.MaxBufferedAudio), "max-buffered-audio", "audio waiting for recognizers, all sessions together, before requests are refused with overloaded (`size`: bytes, or with KiB, MiB or GiB; 0: the default)")
	fs.DurationVar(&s.IdleTimeout, "idle-timeout", 5*time.Minute, "close a session (1001) that sends no whole message for this long: a client that sends nothing, or trickles a frame; a ping keeps a quiet session open; 0: the default; negative (say -1s): never")
	fs.DurationVar(&s.ReturnMemoryAfter, "return-memory-after", 2*time.Second, "once 1,000 sessions were admitted since the last return and then none for this long, collect and return the memory their upgrades freed to the system (costs CPU once per return; waits while voiced sheds or runs late); 0: the default; negative (say -1s): never")
	fs.DurationVar(&s.WriteTimeout, "write-timeout", 5*time.Second, "bound on one write to a client (0: the default)")

	fs.DurationVar(&c.shed.Threshold, "shed.threshold", 25*time.Millisecond, "scheduling delay (p99 of goroutines' wait to run, or the monitor's tick lateness) above which new requests get overloaded and new sessions 503, so accepted work keeps its deadlines, while voiced uses half the CPUs, or 4 times it while voiced has work (goroutines woken 100 times a second) but is starved of CPU; 0: 10 ms; negative (say -1s): never shed")
	fs.DurationVar(&c.shed.LagWindow, "shed.lag-window", 2*time.Second, "how long the largest scheduling delay is remembered as the lag the terminal margin grows with (0: the default)")
	c.fleet.register(fs, &c.session)
	c.sim.RegisterFlags(fs)
	c.engines.register(fs)
	return fs, tokens, origins
}

// checkPublicURL checks a -twilio.public-url: the WebSocket URL Twilio
// is given, which it signs with its query, so it must bring none itself.
func checkPublicURL(raw string) error {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return errors.New("not a URL")
	case u.Scheme != "wss" && u.Scheme != "ws":
		return errors.New("want a wss:// URL, as in the TwiML's <Stream url>")
	case u.Host == "":
		return errors.New("no host")
	case u.User != nil || u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		return errors.New("want scheme, host and path only: the query is the request's")
	}
	return nil
}

// checkExposure refuses to serve beyond loopback without authentication.
func (c *config) checkExposure() error {
	loop, err := loopback(c.addr)
	if err != nil {
		return fmt.Errorf("-addr %q: %w", c.addr, err)
	}
	if c.adminAddr != "off" {
		aloop, err := loopback(c.adminAddr)
		if err != nil {
			return fmt.Errorf("-admin-addr %q: %w", c.adminAddr, err)
		}
		if !aloop && !c.insecureNoAuth {
			return errors.New("refusing to serve -admin-addr (metrics and profiles, no authentication) on a non-loopback address; pass -insecure-no-auth to do so anyway")
		}
	}
	if loop {
		return nil
	}
	if len(c.session.Tokens) > 0 || c.insecureNoAuth {
		return nil
	}
	return errors.New("refusing to listen on a non-loopback address without -auth-token (or VOICED_TOKENS); pass -insecure-no-auth to do so anyway")
}

// loopback reports whether addr (host:port) listens on loopback only.
func loopback(addr string) (bool, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false, err
	}
	if host == "localhost" {
		return true, nil
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback(), nil
}

// byteSize is a flag value in bytes, written as a number with an optional
// KiB, MiB or GiB suffix.
type byteSize int64

func (b *byteSize) String() string {
	if b == nil {
		return "0"
	}
	v := int64(*b)
	for _, u := range []struct {
		name  string
		shift uint
	}{{"GiB", 30}, {"MiB", 20}, {"KiB", 10}} {
		if v != 0 && v%(1<<u.shift) == 0 {
			return strconv.FormatInt(v>>u.shift, 10) + u.name
		}
	}
	return strconv.FormatInt(v, 10)
}

func (b *byteSize) Set(s string) error {
	num, shift := s, uint(0)
	for _, u := range []struct {
		name  string
		shift uint
	}{{"GiB", 30}, {"MiB", 20}, {"KiB", 10}, {"B", 0}} {
		if n, ok := strings.CutSuffix(s, u.name); ok {
			num, shift = n, u.shift
			break
		}
	}
	v, err := strconv.ParseInt(strings.TrimSpace(num), 10, 64)
	if err != nil || v < 0 || v > math.MaxInt64>>shift {
		return fmt.Errorf("%q is not a size: want bytes, or a whole number of KiB, MiB or GiB", s)
	}
	*b = byteSize(v << shift)
	return nil
}

// prefixList is a flag value of comma-separated CIDR prefixes or
// addresses (-trusted-proxies).
type prefixList []netip.Prefix

func (l *prefixList) String() string {
	if l == nil {
		return ""
	}
	out := make([]string, len(*l))
	for i, p := range *l {
		out[i] = p.String()
	}
	return strings.Join(out, ",")
}

func (l *prefixList) Set(v string) error {
	p, err := session.ParseTrustedProxies(v)
	if err != nil {
		return err
	}
	*l = p
	return nil
}
