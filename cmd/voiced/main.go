// Command voiced is the real-time voice pipeline server: it serves
// voiced.v1 sessions over WebSocket at /v1/session, health at /healthz and
// /readyz, and the browser demo at /. Prometheus metrics are at /metrics
// on the admin listener (-admin-addr), and on the session listener too
// only while it is loopback without tokens.
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/lmittmann/tint"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/voiced/voiced/internal/pipeline"
	"github.com/voiced/voiced/internal/saturation"
	"github.com/voiced/voiced/internal/session"
	"github.com/voiced/voiced/web/demo"
)

func main() {
	err := run(context.Background(), os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "voiced:", err)
	}
	os.Exit(exitStatus(err))
}

// usageError is a command line voiced refuses before it starts anything:
// a flag it cannot parse, a value out of range, an exposure it will not
// take.
type usageError struct{ error }

func (e usageError) Unwrap() error { return e.error }

// exitStatus is the process's status once run returned err: 0 (also
// after -h), 2 for a refused command line, as for the flag package's
// ExitOnError (deploy/voiced.service does not restart on it: a restart
// cannot mend it), and 1 for a failure after the start.
func exitStatus(err error) int {
	var usage usageError
	switch {
	case err == nil || errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &usage):
		return 2
	}
	return 1
}

// run parses flags, builds the server and serves until a signal or ctx
// ends it. The first SIGINT/SIGTERM drains: /readyz fails and the HAProxy
// agent says drain, new sessions are refused, in-flight requests finish
// within their deadlines and sessions close with 1012 (service restart:
// clients resume elsewhere); a second signal forces the exit.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cfg, err := parseFlags(args, getenv, stderr)
	if err != nil {
		return usageError{err}
	}
	if cfg.version {
		info, ok := debug.ReadBuildInfo()
		fmt.Fprintln(stdout, version(info, ok))
		return nil
	}
	log, err := newLogger(cfg.logFormat, cfg.logLevel, stderr)
	if err != nil {
		return usageError{err}
	}
	if err := cfg.checkExposure(); err != nil {
		return usageError{err}
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	// Listen first, so a bad address fails at once and /healthz answers
	// while the engines warm up; /readyz and sessions wait for them.
	ln, err := session.Listen(ctx, cfg.addr)
	if err != nil {
		return fmt.Errorf("listen on -addr: %w", err)
	}
	var live atomic.Pointer[session.Server]
	fl, err := startFleet(cfg, &live, ln.Addr().String(), log, reg)
	if err != nil {
		ln.Close()
		return err
	}
	defer fl.close()
	web, err := startHTTP(cfg, ln, fl, &live, reg, log)
	if err != nil {
		return err
	}
	defer web.close()
	return serveSessions(ctx, cfg, web, fl, &live, log, reg)
}

// webServers are voiced's HTTP servers: the session listener's and, unless
// -admin-addr is off, the admin listener's.
type webServers struct {
	hs    *http.Server
	admin *http.Server // nil with -admin-addr off
	addr  string       // the session listener's address
	// errc receives the error that ended either server's Serve.
	errc chan error
}

// close closes the admin server, then the session listener's. The
// sessions, hijacked connections, are not theirs to close.
func (w *webServers) close() {
	if w.admin != nil {
		w.admin.Close()
	}
	w.hs.Close()
}

// startHTTP serves ln, and the admin listener unless -admin-addr is off.
// If the admin listener cannot start, ln's server is closed again.
func startHTTP(cfg *config, ln net.Listener, fl *fleetRuntime, live *atomic.Pointer[session.Server], reg *prometheus.Registry, log *slog.Logger) (*webServers, error) {
	// A loopback listener given tokens is one a proxy or a tunnel on this
	// host reaches (docs/protocol.md, "Pointing a Twilio number at voiced
	// through a tunnel"): it serves any Host, the tokens guarding it, and
	// keeps /metrics, which needs none, to the admin listener. Without
	// tokens it answers loopback names only (loopbackHosts).
	loop, _ := loopback(cfg.addr) // checkExposure has parsed it
	open := loop && len(cfg.session.Tokens) == 0
	mux := newMux(live, reg, open)
	mux.Handle("GET /v1/cluster", fl.handleCluster(live))
	var h http.Handler = mux
	if open {
		h = loopbackHosts(mux)
	}
	w := &webServers{hs: newHTTPServer(h, log), addr: ln.Addr().String(), errc: make(chan error, 2)}
	go func() { w.errc <- w.hs.Serve(ln) }()
	if cfg.adminAddr != "off" {
		admin, aln, err := listenAdmin(cfg.adminAddr, reg, log)
		if err != nil {
			w.hs.Close()
			return nil, err
		}
		w.admin = admin
		go func() { w.errc <- admin.Serve(aln) }()
		log.Info("admin listening", "addr", aln.Addr().String())
	}
	log.Info("voiced listening", "addr", w.addr, "stages", cfg.stages,
		"max_budget", cfg.session.MaxBudget, "auth", len(cfg.session.Tokens) > 0,
		"twilio_signature", cfg.session.TwilioAuthToken != "")
	return w, nil
}

// serveSessions warms the engines, serves sessions on them until a
// listener fails, ctx ends or a signal comes, then drains. Signals are
// caught from its start to its end: one while the engines warm up stops
// the start (startSessions watches for it too), one after that drains as
// soon as the server is ready, and a second one during the drain cuts it
// short rather than killing the process.
func serveSessions(ctx context.Context, cfg *config, web *webServers, fl *fleetRuntime, live *atomic.Pointer[session.Server], log *slog.Logger, reg *prometheus.Registry) error {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	srv, stopSessions, err := startSessions(ctx, cfg, log, reg)
	if errors.Is(err, errStoppedStarting) {
		log.Info("voiced stopped while starting: a signal came while the engines warmed up")
		return nil
	}
	if err != nil {
		return err
	}
	stuck := false
	// A stage stuck in an engine would hold the engine's Close too: then
	// the process exits without it.
	defer func() { stopSessions(!stuck) }()
	// With -redis, not ready before the first check has said whether
	// Redis is up (it began before the engines warmed, and is bounded by
	// -redis.budget): a client resuming here at once then finds its
	// conversation rather than a store taken for away.
	fl.awaitRedis(ctx)
	live.Store(srv)
	log.Info("voiced ready", "url", "http://"+web.addr+"/")

	serveErr := awaitStop(ctx, web.errc, sigs, log)
	stuck, err = drain(cfg, srv, web.hs, sigs, log)
	if serveErr != nil {
		return errors.Join(fmt.Errorf("serve: %w", serveErr), err)
	}
	if err != nil {
		return err
	}
	log.Info("voiced stopped")
	return nil
}

// awaitStop waits for what ends serving: a listener failing, whose error
// it returns, the end of ctx, or a signal.
func awaitStop(ctx context.Context, errc <-chan error, sigs <-chan os.Signal, log *slog.Logger) (serveErr error) {
	select {
	case serveErr = <-errc:
		// A listener failed. The sessions are hijacked connections that
		// hs.Close leaves alone: they drain as on a signal, keeping their
		// requests' promises, before the deferred stopSessions closes the
		// engines they run on.
	case <-ctx.Done():
	case sig := <-sigs:
		log.Info("draining: finishing in-flight requests", "signal", sig.String())
	}
	return serveErr
}

// errStoppedStarting is startSessions' error when a signal (or the end of
// its ctx) stopped the engines' warm-up.
var errStoppedStarting = errors.New("stopped while starting")

// startSessions warms the engines and builds the session server on them:
// speech, the stages (a signal while they warm up stops the start, with
// errStoppedStarting), the pipeline, and the saturation tracker with its
// goroutine. stop ends the tracker and, when closeEngines, closes the
// engines.
func startSessions(ctx context.Context, cfg *config, log *slog.Logger, reg *prometheus.Registry) (srv *session.Server, stop func(closeEngines bool), err error) {
	startCtx, stopStart := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	// Speech first: it is quick to build, so a setting it refuses (a
	// default voice it does not have) stops voiced before the stages'
	// warm-up rather than after it.
	speech, err := buildSpeech(startCtx, cfg, log, reg)
	if err != nil {
		stopStart()
		return nil, nil, err
	}
	st, closeStages, err := buildStages(startCtx, cfg, log, reg)
	stopped := startCtx.Err() != nil
	stopStart()
	if err != nil {
		if stopped {
			// Whichever engine saw the stop failed with it: not a
			// failure of the start.
			return nil, nil, errStoppedStarting
		}
		return nil, nil, err
	}
	defer func() {
		if err != nil {
			closeStages()
		}
	}()
	if speech != nil {
		cfg.session.Speech = speech
	}
	pl, err := pipeline.New(cfg.pipeline, st, pipeline.NewMetrics(reg))
	if err != nil {
		return nil, nil, err
	}
	load := saturation.New(cfg.shed, reg)
	cfg.session.Load = load
	srv = session.NewServer(cfg.session, pl, log, session.NewMetrics(reg))
	load.TrackRequests(srv.InFlight)
	loadCtx, stopLoad := context.WithCancel(context.Background())
	var loadDone sync.WaitGroup
	loadDone.Go(func() { load.Run(loadCtx) })
	return srv, func(closeEngines bool) {
		stopLoad()
		loadDone.Wait()
		if closeEngines {
			closeStages()
		}
	}, nil
}

// drain finishes the sessions' requests in flight within
// -shutdown-timeout (a signal on sigs cuts it short: sessions are closed
// then), then shuts the HTTP server down. stuck reports a stage that never
// returned, whose engines must not be closed. A signal already waiting on
// sigs (two sent before the drain began) cuts it short too.
func drain(cfg *config, srv *session.Server, hs *http.Server, sigs <-chan os.Signal, log *slog.Logger) (stuck bool, err error) {
	// Sessions first: hs.Shutdown does not wait for hijacked WebSocket
	// connections.
	tctx, cancelT := context.WithTimeout(context.Background(), cfg.shutdownTimeout)
	defer cancelT()
	dctx, cut := context.WithCancel(tctx)
	var watch sync.WaitGroup
	watch.Go(func() {
		select {
		case <-sigs:
			cut()
		case <-dctx.Done():
		}
	})
	err = srv.Shutdown(dctx)
	forced := dctx.Err() != nil && tctx.Err() == nil
	if forced {
		log.Warn("second signal: forcing exit")
	}
	cut()
	watch.Wait()
	switch {
	case errors.Is(err, session.ErrStuck):
		return true, fmt.Errorf("forced exit: %w", err)
	case err != nil && !forced:
		log.Warn("sessions did not drain in time (-shutdown-timeout); closed them", "err", err)
	}
	hctx, cancelH := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancelH()
	if err := hs.Shutdown(hctx); err != nil {
		return false, fmt.Errorf("http shutdown: %w", err)
	}
	return false, nil
}

// newMux routes the server's endpoints. Until live holds the session
// server (the engines are warming up), sessions and /readyz answer 503;
// /readyz does too while draining, saturated or at -max-sessions.
//
// /metrics is served here only when publicMetrics is set (the listener is
// loopback and has no tokens): otherwise anyone who can reach the server
// (off loopback, or through a proxy or tunnel) could read it, and the
// admin listener serves it instead.
func newMux(live *atomic.Pointer[session.Server], reg *prometheus.Registry, publicMetrics bool) *http.ServeMux {
	mux := http.NewServeMux()
	serve := func(h func(*session.Server, http.ResponseWriter, *http.Request)) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			srv := live.Load()
			if srv == nil {
				w.Header().Set("Retry-After", "1")
				http.Error(w, "starting: engines warming up", http.StatusServiceUnavailable)
				return
			}
			h(srv, w, r)
		}
	}
	mux.HandleFunc("GET /v1/session", serve((*session.Server).ServeHTTP))
	// Phone calls: Twilio Media Streams (docs/protocol.md, "Phone calls").
	mux.HandleFunc("GET /v1/twilio", serve((*session.Server).ServeTwilio))
	if publicMetrics {
		mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	}
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, "ok\n")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		switch srv := live.Load(); {
		case srv == nil:
			http.Error(w, "starting", http.StatusServiceUnavailable)
		case srv.Draining():
			http.Error(w, "draining", http.StatusServiceUnavailable)
		case srv.Saturated():
			w.Header().Set("Retry-After", "1")
			http.Error(w, "saturated", http.StatusServiceUnavailable)
		case srv.Full():
			// A new session would be refused (503) until one ends: not
			// ready for one, as the fleet agent says (weight 0).
			w.Header().Set("Retry-After", "1")
			http.Error(w, "full: -max-sessions", http.StatusServiceUnavailable)
		default:
			io.WriteString(w, "ready\n")
		}
	})
	mux.Handle("GET /", demo.Handler())
	return mux
}

// listenAdmin listens on the operator's address, serving /metrics and Go's
// profiler, so saturation can be diagnosed in production.
func listenAdmin(addr string, reg *prometheus.Registry, log *slog.Logger) (*http.Server, net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, nil, fmt.Errorf("listen on -admin-addr (off to disable): %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	// Not /debug/pprof/cmdline: the command line can hold -auth-token,
	// -resume-secret or a -redis URL with its password, and this listener
	// has no authentication (the index answers it as an unknown profile).
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	var h http.Handler = mux
	if loop, _ := loopback(addr); loop { // checkExposure has parsed it
		h = loopbackHosts(mux)
	}
	return newHTTPServer(h, log), ln, nil
}

// loopbackHosts refuses (403) a request whose Host is not a loopback
// name or address, on a loopback listener that asks for no token. A web
// page can reach such a listener by DNS rebinding (its own name made to
// resolve to 127.0.0.1): the browser then sends that name as the Host
// and the page's origin as the Origin, which agree, so the WebSocket's
// origin check lets it open sessions, and it reads /metrics and the
// profiler as same-origin. A loopback name or address cannot be rebound.
func loopbackHosts(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !loopbackHost(r.Host) {
			http.Error(w, "this server has no -auth-token and answers only localhost, 127.0.0.1 or [::1] "+
				"(give it tokens to serve it through a proxy or tunnel)", http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// loopbackHost reports whether a Host header names loopback: localhost
// or a loopback address, with or without a port. An empty one (HTTP/1.0)
// is no browser's, so no rebinding's.
func loopbackHost(hostport string) bool {
	if hostport == "" {
		return true
	}
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	if h := strings.TrimSuffix(strings.ToLower(host), "."); h == "localhost" {
		return true
	}
	ip := net.ParseIP(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]"))
	return ip != nil && ip.IsLoopback()
}

// httpTimeout bounds how long a connection may send nothing: a request's
// header (ReadHeaderTimeout), and the wait for the next request on a
// keep-alive connection (IdleTimeout), which net/http leaves unbounded
// without one: a client could hold a goroutine, its buffers and a
// descriptor per connection for ever after one /healthz or refused
// upgrade. A WebSocket session, hijacked, is not concerned (see
// -idle-timeout).
const httpTimeout = 10 * time.Second

// maxHeaderBytes bounds a request's header on both listeners.
const maxHeaderBytes = 64 << 10

// newHTTPServer is the HTTP server of a listener, public or admin.
func newHTTPServer(h http.Handler, log *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           noBody(h),
		ReadHeaderTimeout: httpTimeout,
		IdleTimeout:       httpTimeout,
		// net/http's default is 1 MiB, held per connection while a slow
		// peer sends it; a session's upgrade (a token, a resume token) is
		// well under 8 KiB.
		MaxHeaderBytes: maxHeaderBytes,
		ErrorLog:       slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
}

// noBody answers a request that declares a body (none of the endpoints
// reads one) and then closes the connection. Otherwise net/http, before
// writing the answer, reads what is left of the body (up to 256 KiB) to
// keep the connection alive, with no deadline: ReadHeaderTimeout ends
// with the header and IdleTimeout starts after the answer, so a peer that
// declares a body and sends none held the connection, a goroutine and its
// buffers for as long as it liked.
func noBody(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength != 0 {
			w.Header().Set("Connection", "close")
		}
		h.ServeHTTP(w, r)
	})
}

// newLogger logs with tint on a terminal and JSON otherwise (format auto).
// tint colours only a terminal, so text logs written to a file stay plain.
// JSON logs give every duration as milliseconds, a number under the key
// with "_ms" appended ("took_ms":4997.2), so that they compare and sum
// without parsing; text logs show Go durations (took=5s).
func newLogger(format, level string, w io.Writer) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("-log-level %q: want debug, info, warn or error", level)
	}
	tty := isTerminal(w)
	if format == "auto" {
		format = "json"
		if tty {
			format = "text"
		}
	}
	switch format {
	case "text":
		return textLogger(w, lv, tty), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: lv, ReplaceAttr: durationsInMillis})), nil
	}
	return nil, fmt.Errorf("-log-format %q: want auto, text or json", format)
}

// textLogger is the text log, coloured when colour is set (a terminal).
func textLogger(w io.Writer, lv slog.Level, colour bool) *slog.Logger {
	return slog.New(tint.NewTextHandler(w, &tint.Options{Level: lv, TimeFormat: time.TimeOnly, NoColor: !colour, ReplaceAttr: noEscapes}))
}

// noEscapes rewrites a value holding an ESC, or the text \x1b, as \x1B.
// Values carry a peer's text (a malformed message's field, quoted in an
// error; a call's, before it has authenticated), and tint, colouring a
// terminal, turns every \x1b of a quoted value back into ESC to keep its
// own colours: a peer's ESC, and its text \x1b (quoted as \\x1b), would
// reach the terminal as an escape sequence (clear the screen, hide what
// follows, retitle the window).
func noEscapes(_ []string, a slog.Attr) slog.Attr {
	if k := a.Value.Kind(); k != slog.KindString && k != slog.KindAny {
		return a
	}
	if s := a.Value.String(); strings.Contains(s, "\x1b") || strings.Contains(s, `\x1b`) {
		return slog.String(a.Key, escapes.Replace(s))
	}
	return a
}

var escapes = strings.NewReplacer("\x1b", `\x1B`, `\x1b`, `\x1B`)

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// durationsInMillis rewrites a duration attribute as milliseconds under
// the key with "_ms" appended.
func durationsInMillis(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() != slog.KindDuration {
		return a
	}
	return slog.Float64(a.Key+"_ms", float64(a.Value.Duration())/float64(time.Millisecond))
}

// version describes the build: the module's version, the commit it was
// built from, that commit's time and whether the tree had uncommitted
// changes, and the Go version.
func version(info *debug.BuildInfo, ok bool) string {
	if !ok || info == nil {
		return "voiced (no build information)"
	}
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	var b strings.Builder
	fmt.Fprintf(&b, "voiced %s", cmp.Or(info.Main.Version, "(devel)"))
	if rev := settings["vcs.revision"]; rev != "" {
		fmt.Fprintf(&b, ", commit %s", rev)
		var about []string
		if t := settings["vcs.time"]; t != "" {
			about = append(about, t)
		}
		if settings["vcs.modified"] == "true" {
			about = append(about, "modified")
		}
		if len(about) > 0 {
			fmt.Fprintf(&b, " (%s)", strings.Join(about, ", "))
		}
	} else {
		b.WriteString(", commit unknown")
	}
	fmt.Fprintf(&b, ", %s", info.GoVersion)
	return b.String()
}

// splitList splits a comma-separated flag value, dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}
