package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/voiced/voiced/internal/pipeline"
	"github.com/voiced/voiced/internal/protocol"
	"github.com/voiced/voiced/internal/session"
)

func TestMain(m *testing.M) {
	code := m.Run()
	removeVoicedBinary()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

const testTimeout = 20 * time.Second

// startVoiced runs voiced in-process with args and returns its base URL
// once it reports ready, and a function that stops it and returns run's
// error.
func startVoiced(t testing.TB, args ...string) (string, func() error) {
	base, _, stop := startVoicedAdmin(t, args...)
	return base, stop
}

// startVoicedAdmin is startVoiced that also returns the admin listener's
// base URL.
func startVoicedAdmin(t testing.TB, args ...string) (string, string, func() error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	pr, pw := io.Pipe()
	errc := make(chan error, 1)
	go func() {
		errc <- run(ctx, append([]string{"-addr", "127.0.0.1:0", "-admin-addr", "127.0.0.1:0", "-log-format", "json"}, args...), func(string) string { return "" }, io.Discard, pw)
		pw.Close()
	}()
	addr := make(chan string, 1)
	var adminAddr string // written before addr is sent
	logDone := make(chan struct{})
	go func() {
		defer close(logDone)
		sc := bufio.NewScanner(pr)
		var listening string
		for sc.Scan() {
			var line struct {
				Msg  string `json:"msg"`
				Addr string `json:"addr"`
			}
			if json.Unmarshal(sc.Bytes(), &line) != nil {
				continue
			}
			switch line.Msg {
			case "voiced listening":
				listening = line.Addr
			case "admin listening":
				adminAddr = line.Addr
			case "voiced ready":
				addr <- listening
			}
		}
	}()
	stop := func() error {
		cancel()
		err := <-errc
		<-logDone
		return err
	}
	select {
	case a := <-addr:
		admin := ""
		if adminAddr != "" {
			admin = "http://" + adminAddr
		}
		return "http://" + a, admin, stop
	case err := <-errc:
		pw.Close()
		<-logDone
		cancel()
		t.Fatalf("voiced exited before ready: %v", err)
	case <-ctx.Done():
		t.Fatal("voiced not ready in time")
	}
	return "", "", nil
}

// TestAdminListener: the operator's listener serves metrics and the
// profiler; the public listener serves metrics only while it is loopback.
func TestAdminListener(t *testing.T) {
	base, admin, stop := startVoicedAdmin(t, "-stages", "sim")
	defer func() { require.NoError(t, stop()) }()
	require.NotEmpty(t, admin)
	code, body := get(t, admin+"/metrics")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, "voiced_sched_delay_seconds")
	code, body = get(t, admin+"/debug/pprof/goroutine?debug=1")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, "goroutine profile")
	code, _ = get(t, base+"/debug/pprof/")
	require.NotEqual(t, http.StatusOK, code, "no profiler on the public listener")
	code, body = get(t, admin+"/debug/pprof/cmdline")
	require.NotEqual(t, http.StatusOK, code, "the command line (which may hold secrets) is not served: %s", body)
	code, _ = get(t, base+"/metrics")
	require.Equal(t, http.StatusOK, code, "a loopback listener keeps /metrics")

	var live atomic.Pointer[session.Server]
	public := httptest.NewServer(newMux(&live, prometheus.NewRegistry(), false))
	defer public.Close()
	code, _ = get(t, public.URL+"/metrics")
	require.Equal(t, http.StatusNotFound, code, "off loopback, /metrics is the admin listener's only")
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestServeSim runs the binary's wiring end to end in simulation mode:
// endpoints, one request over a real WebSocket, and the drain on stop.
func TestServeSim(t *testing.T) {
	base, stop := startVoiced(t, "-stages", "sim", "-sim-fail-share", "-1", "-sim-slow-share", "-1")

	code, body := get(t, base+"/healthz")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "ok\n", body)
	code, body = get(t, base+"/readyz")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "ready\n", body)
	code, body = get(t, base+"/")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, "voiced")

	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	conn, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(base, "http")+"/v1/session", nil)
	require.NoError(t, err)
	defer conn.CloseNow()
	_, b, err := conn.Read(ctx)
	require.NoError(t, err)
	var ready protocol.SessionReady
	require.NoError(t, json.Unmarshal(b, &ready))
	require.Equal(t, protocol.Name, ready.Protocol)

	frame, err := protocol.EncodeBinaryAudio(nil, protocol.AudioHeader{
		RequestID: "r1", DeadlineAt: protocol.Millis(time.Now().Add(3 * time.Second)), Final: true,
	}, make([]int16, 320))
	require.NoError(t, err)
	require.NoError(t, conn.Write(ctx, websocket.MessageBinary, frame))
	for {
		_, b, err := conn.Read(ctx)
		require.NoError(t, err)
		m, err := protocol.DecodeServer(b)
		require.NoError(t, err)
		if protocol.Terminal(m.Type) {
			require.Equal(t, protocol.TypeResult, m.Type, "%s", b)
			break
		}
	}

	code, body = get(t, base+"/metrics")
	require.Equal(t, http.StatusOK, code)
	for _, name := range []string{
		"voiced_stage_duration_seconds", "voiced_request_duration_seconds", "voiced_llm_start_time_left_seconds",
		"voiced_requests_total", "voiced_cancellations_total", "voiced_sessions", "voiced_requests_in_flight",
		"process_resident_memory_bytes",
	} {
		require.Contains(t, body, name)
	}

	conn.Close(websocket.StatusNormalClosure, "")
	require.NoError(t, stop())
}

func TestFlags(t *testing.T) {
	dir := t.TempDir()
	pricesFile, badPricesFile := filepath.Join(dir, "prices.yaml"), filepath.Join(dir, "bad.yaml")
	require.NoError(t, os.WriteFile(pricesFile, []byte("gpt-4o-mini: {input: 0.15, output: 0.60}\n"), 0o600))
	require.NoError(t, os.WriteFile(badPricesFile, []byte("gpt-4o-mini: {input: 0.15, outptu: 0.60}\n"), 0o600))
	env := func(kv ...string) func(string) string {
		return func(k string) string {
			for i := 0; i+1 < len(kv); i += 2 {
				if kv[i] == k {
					return kv[i+1]
				}
			}
			return ""
		}
	}
	tests := []struct {
		name    string
		args    []string
		env     func(string) string
		wantErr string
		check   func(t *testing.T, c *config)
	}{
		{name: "defaults", args: nil, env: env(), check: func(t *testing.T, c *config) {
			require.Equal(t, "127.0.0.1:8080", c.addr)
			require.Equal(t, 1700*time.Millisecond, c.session.MaxBudget)
			require.NoError(t, c.checkExposure())
		}},
		{name: "addr from env", env: env("VOICED_ADDR", "127.0.0.1:9999"), check: func(t *testing.T, c *config) {
			require.Equal(t, "127.0.0.1:9999", c.addr)
		}},
		{name: "public without auth refused", args: []string{"-addr", "0.0.0.0:8080"}, env: env(), check: func(t *testing.T, c *config) {
			require.ErrorContains(t, c.checkExposure(), "non-loopback")
		}},
		{name: "public with env token", args: []string{"-addr", "0.0.0.0:8080"}, env: env("VOICED_TOKENS", "a, b"), check: func(t *testing.T, c *config) {
			require.Equal(t, []string{"a", "b"}, c.session.Tokens)
			require.NoError(t, c.checkExposure())
		}},
		{name: "public, explicitly open", args: []string{"-addr", "[::]:8080", "-insecure-no-auth"}, env: env(), check: func(t *testing.T, c *config) {
			require.NoError(t, c.checkExposure())
		}},
		{name: "twilio auth token from env", env: env("VOICED_TWILIO_AUTH_TOKEN", "tw-env"), check: func(t *testing.T, c *config) {
			require.Equal(t, "tw-env", c.session.TwilioAuthToken)
		}},
		{name: "twilio auth token flag over env", args: []string{"-twilio.auth-token", "tw-flag", "-twilio.public-url", "wss://abcd.trycloudflare.com/v1/twilio"},
			env: env("VOICED_TWILIO_AUTH_TOKEN", "tw-env"), check: func(t *testing.T, c *config) {
				require.Equal(t, "tw-flag", c.session.TwilioAuthToken)
				require.Equal(t, "wss://abcd.trycloudflare.com/v1/twilio", c.session.TwilioPublicURL)
			}},
		// Twilio signs the URL with the request's query: one in the flag
		// would be signed twice, an https:// one never matches.
		{name: "twilio public URL with a query", args: []string{"-twilio.public-url", "wss://h.example/v1/twilio?token=x"}, env: env(),
			wantErr: "-twilio.public-url \"wss://h.example/v1/twilio?token=x\": want scheme, host and path only"},
		{name: "twilio public URL https", args: []string{"-twilio.public-url", "https://h.example/v1/twilio"}, env: env(),
			wantErr: "want a wss:// URL"},
		{name: "admin on loopback by default", env: env(), check: func(t *testing.T, c *config) {
			require.Equal(t, "127.0.0.1:8081", c.adminAddr)
		}},
		{name: "public admin refused", args: []string{"-admin-addr", "0.0.0.0:8081", "-auth-token", "x"}, env: env(), check: func(t *testing.T, c *config) {
			require.ErrorContains(t, c.checkExposure(), "-admin-addr")
		}},
		// It answers anyone, unauthenticated: taken on any address.
		// The second listener failed with "address already in use".
		{name: "admin on -addr", args: []string{"-addr", "127.0.0.1:8080", "-admin-addr", "127.0.0.1:8080"}, env: env(),
			wantErr: "-admin-addr 127.0.0.1:8080 is -addr too: each listener needs its own port"},
		{name: "agent on -addr", args: []string{"-haproxy-agent-addr", "127.0.0.1:8080"}, env: env(),
			wantErr: "-haproxy-agent-addr 127.0.0.1:8080 is -addr too"},
		{name: "any free ports", args: []string{"-addr", "127.0.0.1:0", "-admin-addr", "127.0.0.1:0", "-haproxy-agent-addr", "127.0.0.1:0"}, env: env(),
			check: func(t *testing.T, c *config) {}},
		{name: "admin off", args: []string{"-addr", "0.0.0.0:8080", "-auth-token", "x", "-admin-addr", "off"}, env: env(), check: func(t *testing.T, c *config) {
			require.NoError(t, c.checkExposure())
		}},
		{name: "llm base URLs from the SDKs' variables", env: env("ANTHROPIC_BASE_URL", "https://api.anthropic.com",
			"GOOGLE_GEMINI_BASE_URL", "https://generativelanguage.googleapis.com", "OPENAI_BASE_URL", "http://127.0.0.1:11434/v1"),
			check: func(t *testing.T, c *config) {
				require.Equal(t, "https://api.anthropic.com", c.engines.llm.Anthropic.BaseURL)
				require.Equal(t, "https://generativelanguage.googleapis.com", c.engines.llm.Gemini.BaseURL)
				require.Equal(t, "http://127.0.0.1:11434/v1", c.engines.llm.OpenAI.BaseURL)
			}},
		{name: "llm base URL flag over variable", args: []string{"-llm.anthropic.base-url", "http://127.0.0.1:9/v1"},
			env: env("ANTHROPIC_BASE_URL", "https://api.anthropic.com"), check: func(t *testing.T, c *config) {
				require.Equal(t, "http://127.0.0.1:9/v1", c.engines.llm.Anthropic.BaseURL)
			}},
		// Refused only once the classifier was trained, 6 s after the
		// start, as "llm: llm: -llm.openai.base-url: ...".
		{name: "llm base URL without a scheme", args: []string{"-llm.openai.base-url", "api.openai.com"}, env: env("OPENAI_API_KEY", "sk-s3cret"),
			wantErr: "-llm.openai.base-url: want an absolute http:// or https:// URL"},
		{name: "llm base URL of a provider without a key", args: []string{"-llm.openai.base-url", "api.openai.com"}, env: env(), check: func(t *testing.T, c *config) {}},
		{name: "llm cost caps and prices", args: []string{"-llm.max-cost-per-conversation", "0.05", "-llm.max-cost-per-day", "20", "-llm.prices", pricesFile},
			env: env(), check: func(t *testing.T, c *config) {
				require.InDelta(t, 0.05, c.engines.llm.MaxCostPerConversation, 0)
				require.InDelta(t, 20, c.engines.llm.MaxCostPerDay, 0)
				require.Equal(t, pricesFile, c.engines.llm.PricesFile)
			}},
		{name: "tenant cost cap", args: []string{"-llm.max-cost-per-tenant-day", "2.5", "-auth-token", "a,b"}, env: env(), check: func(t *testing.T, c *config) {
			require.InDelta(t, 2.5, c.engines.llm.MaxCostPerTenantDay, 0)
		}},
		{name: "tenant cost cap without tokens", args: []string{"-llm.max-cost-per-tenant-day", "2.5"}, env: env(),
			wantErr: "-llm.max-cost-per-tenant-day 2.5 needs -auth-token (or VOICED_TOKENS) or -twilio.auth-token"},
		// Tenants are named with the resume secret: without a shared one
		// each instance, and each restart, counted a tenant's spend anew,
		// so the cap said to hold fleet-wide held per process.
		{name: "tenant cost cap on Redis without a resume secret", args: []string{"-llm.max-cost-per-tenant-day", "2.5", "-auth-token", "a", "-redis", "redis://127.0.0.1:6379/0"},
			env: env(), wantErr: "-llm.max-cost-per-tenant-day 2.5 with -redis needs -resume-secret (or VOICED_RESUME_SECRET)"},
		{name: "tenant cost cap on Redis with a resume secret", args: []string{"-llm.max-cost-per-tenant-day", "2.5", "-auth-token", "a", "-redis", "redis://127.0.0.1:6379/0"},
			env: env("VOICED_RESUME_SECRET", "0123456789abcdef0123"), check: func(t *testing.T, c *config) {}},
		{name: "twilio tenant cost cap on Redis without a resume secret", args: []string{"-llm.max-cost-per-tenant-day", "2.5", "-twilio.auth-token", "t", "-redis", "redis://127.0.0.1:6379/0"},
			env: env(), check: func(t *testing.T, c *config) {}},
		{name: "negative tenant cost cap", args: []string{"-llm.max-cost-per-tenant-day", "-1", "-auth-token", "a"}, env: env(), wantErr: "-llm.max-cost-per-tenant-day -1: want a finite number >= 0"},
		{name: "negative cost cap", args: []string{"-llm.max-cost-per-day", "-1"}, env: env(), wantErr: "-llm.max-cost-per-day -1: want a finite number >= 0"},
		// The defaults used to replace these quietly: a load test with
		// instant "simulated" stages.
		{name: "NaN sim sigma", args: []string{"-sim-sigma", "NaN"}, env: env(), wantErr: "-sim-sigma NaN: must be a finite number"},
		{name: "infinite sim slow factor", args: []string{"-sim-slow-factor", "+Inf"}, env: env(), wantErr: "-sim-slow-factor +Inf: must be a finite number"},
		{name: "negative sim median", args: []string{"-sim-llm-median", "-400ms"}, env: env(), wantErr: "-sim-llm-median -400ms: must not be negative"},
		{name: "negative sim slow factor", args: []string{"-sim-slow-factor", "-3"}, env: env(), wantErr: "-sim-slow-factor -3: must not be negative"},
		{name: "negative sim pieces", args: []string{"-sim-llm-pieces", "-1"}, env: env(), wantErr: "-sim-llm-pieces -1: must not be negative"},
		{name: "NaN cost cap", args: []string{"-llm.max-cost-per-conversation", "NaN"}, env: env(), wantErr: "-llm.max-cost-per-conversation NaN"},
		// Each of these was taken silently: a breaker that never opens
		// (uint32(-1) failures), every answer cut after its first piece,
		// every OpenAI attempt timed out at once, max_tokens -5.
		{name: "negative breaker failures", args: []string{"-llm.breaker-failures", "-1"}, env: env(), wantErr: "-llm.breaker-failures -1: must not be negative"},
		{name: "breaker failures past 32 bits", args: []string{"-llm.breaker-failures", "4294967296"}, env: env(), wantErr: "-llm.breaker-failures 4294967296: want at most 4294967295"},
		{name: "negative stall limit", args: []string{"-llm.stall-limit", "-1s"}, env: env(), wantErr: "-llm.stall-limit -1s: must not be negative"},
		{name: "negative provider cap", args: []string{"-llm.openai.cap", "-1s"}, env: env(), wantErr: "-llm.openai.cap -1s: must not be negative"},
		{name: "negative output tokens", args: []string{"-llm.max-output-tokens", "-5"}, env: env(), wantErr: "-llm.max-output-tokens -5: must not be negative"},
		{name: "infinite start tps", args: []string{"-llm.gemini.start-tps", "+Inf"}, env: env(), wantErr: "-llm.gemini.start-tps +Inf"},
		{name: "retries off", args: []string{"-llm.max-retries", "-1"}, env: env(), check: func(t *testing.T, c *config) {
			require.Equal(t, -1, c.engines.llm.MaxRetries)
		}},
		{name: "bad price table", args: []string{"-llm.prices", badPricesFile}, env: env(), wantErr: `-llm.prices: llm: price table`},
		{name: "missing price table", args: []string{"-llm.prices", pricesFile + ".missing"}, env: env(), wantErr: "no such file"},
		{name: "bad stages", args: []string{"-stages", "fast"}, env: env(), wantErr: "-stages"},
		{name: "stray argument", args: []string{"extra"}, env: env(), wantErr: "unexpected argument"},
		{name: "negative queue", args: []string{"-outbound-queue", "-1"}, env: env(), wantErr: "-outbound-queue -1: must not be negative"},
		{name: "queue too small for a resume", args: []string{"-outbound-queue", "8"}, env: env(), wantErr: "-outbound-queue 8: must be at least 32"},
		{name: "smallest queue", args: []string{"-outbound-queue", "32"}, env: env(), check: func(t *testing.T, c *config) {
			require.Equal(t, 32, c.session.OutboundQueue)
		}},
		{name: "negative budget", args: []string{"-max-budget", "-1s"}, env: env(), wantErr: "-max-budget -1s"},
		// Taken before: STT never started, and every request ended
		// deadline_exceeded; speech was always skipped.
		{name: "stt minimum above its cap", args: []string{"-stt.min", "1.5s"}, env: env(), wantErr: "-stt.min 1.5s is above -stt.cap 1.2s: the stage would never start"},
		{name: "tts minimum above its cap", args: []string{"-tts.cap", "100ms", "-tts.min", "200ms"}, env: env(), wantErr: "-tts.min 200ms is above -tts.cap 100ms"},
		{name: "minimum equal to its cap", args: []string{"-llm.cap", "300ms", "-llm.min", "300ms"}, env: env(), check: func(t *testing.T, c *config) {
			require.Equal(t, 300*time.Millisecond, c.pipeline.LLM.Min)
		}},
		{name: "margin over reserve", args: []string{"-terminal-margin", "200ms"}, env: env(), wantErr: "must be less than -reserve"},
		// Taken before: every request ended deadline_exceeded.
		{name: "budget under reserve", args: []string{"-reserve", "2s"}, env: env(),
			wantErr: "-max-budget 1.7s is less than -reserve 2s plus -stt.min 30ms: no request's STT could ever start"},
		{name: "budget under reserve and STT minimum", args: []string{"-max-budget", "129ms"}, env: env(), wantErr: "-max-budget 129ms is less than -reserve 100ms plus -stt.min 30ms"},
		{name: "smallest budget", args: []string{"-max-budget", "130ms"}, env: env(), check: func(t *testing.T, c *config) {
			require.Equal(t, 130*time.Millisecond, c.session.MaxBudget)
		}},
		{name: "buffered audio default", env: env(), check: func(t *testing.T, c *config) {
			require.EqualValues(t, 256<<20, c.session.MaxBufferedAudio)
		}},
		{name: "buffered audio in GiB", args: []string{"-max-buffered-audio", "2GiB"}, env: env(), check: func(t *testing.T, c *config) {
			require.EqualValues(t, 2<<30, c.session.MaxBufferedAudio)
		}},
		{name: "buffered audio in bytes", args: []string{"-max-buffered-audio", "65536"}, env: env(), check: func(t *testing.T, c *config) {
			require.EqualValues(t, 65536, c.session.MaxBufferedAudio)
		}},
		{name: "per-client limit and trusted proxies", args: []string{"-max-sessions-per-client", "3", "-trusted-proxies", "10.0.0.11, 2001:db8::/32"},
			env: env(), check: func(t *testing.T, c *config) {
				require.Equal(t, 3, c.session.MaxSessionsPerClient)
				require.Equal(t, []netip.Prefix{netip.MustParsePrefix("10.0.0.11/32"), netip.MustParsePrefix("2001:db8::/32")}, c.session.TrustedProxies)
			}},
		{name: "no per-client limit by default", env: env(), check: func(t *testing.T, c *config) {
			require.Zero(t, c.session.MaxSessionsPerClient)
			require.Empty(t, c.session.TrustedProxies)
		}},
		{name: "negative per-client limit", args: []string{"-max-sessions-per-client", "-1"}, env: env(), wantErr: "-max-sessions-per-client -1: must not be negative"},
		{name: "trusted proxy not a CIDR", args: []string{"-trusted-proxies", "10.0.0.0/8,haproxy"}, env: env(),
			wantErr: `invalid value "10.0.0.0/8,haproxy" for flag -trusted-proxies: "haproxy": not an address or CIDR prefix`},
		{name: "buffered audio, bad unit", args: []string{"-max-buffered-audio", "2GB"}, env: env(), wantErr: "not a size"},
		{name: "buffered audio, negative", args: []string{"-max-buffered-audio", "-1MiB"}, env: env(), wantErr: "not a size"},
		{name: "buffered audio, overflow", args: []string{"-max-buffered-audio", "9999999999GiB"}, env: env(), wantErr: "not a size"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := parseFlags(tt.args, tt.env, io.Discard)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			tt.check(t, c)
		})
	}
}

// TestReadmeFlags keeps the README's flag reference true: it must be the
// current `voiced -h` output. Regenerate it with `make readme-flags`.
func TestReadmeFlags(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	const begin, end = "<!-- voiced -h begin -->\n```text\n", "```\n<!-- voiced -h end -->"
	s := string(readme)
	i, j := strings.Index(s, begin), strings.Index(s, end)
	require.True(t, i >= 0 && j > i, "README.md has no flag reference between the markers")
	var help strings.Builder
	fs, _, _ := newFlagSet(&config{}, func(string) string { return "" }, &help)
	fs.Usage()
	want, got := strings.Split(help.String(), "\n"), strings.Split(s[i+len(begin):j], "\n")
	for k := range min(len(want), len(got)) {
		if want[k] != got[k] {
			t.Fatalf("README.md's flag reference is stale (run make readme-flags): line %d is\n%s\nwant\n%s", k+1, got[k], want[k])
		}
	}
	require.Equal(t, len(want), len(got), "README.md's flag reference is stale: run make readme-flags")
}

// TestReadyzFullAtMaxSessions: an instance holding -max-sessions refuses
// new sessions with 503, so it is not ready for them, as the fleet agent
// says (weight 0) and as while saturated. /readyz answered 200 there,
// and a balancer checking only it sent new sessions to be refused.
func TestReadyzFullAtMaxSessions(t *testing.T) {
	base, stop := startVoiced(t, "-stages", "sim", "-max-sessions", "1")
	defer func() { require.NoError(t, stop()) }()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	conn, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(base, "http")+"/v1/session", nil)
	require.NoError(t, err)
	defer conn.CloseNow()
	_, _, err = conn.Read(ctx) // session.ready: the session is registered
	require.NoError(t, err)

	resp, err := http.Get(base + "/readyz")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, "/readyz at -max-sessions")
	require.Equal(t, "1", resp.Header.Get("Retry-After"))
	_, _, err = websocket.Dial(ctx, "ws"+strings.TrimPrefix(base, "http")+"/v1/session", nil)
	require.Error(t, err, "a new session is refused meanwhile")
}

// TestZeroSaysWhatItMeans: a session or pipeline flag given 0 that the
// server runs with its default instead says so in its help (and so in the
// README's copy). -reserve 0, -tts.min 0 or -retrieval.top-k 0 read as
// "none", and were silently the defaults, 100 ms, 30 ms and 3.
func TestZeroSaysWhatItMeans(t *testing.T) {
	zeroSaid := regexp.MustCompile(`\b0(:| means)`)
	env := func(string) string { return "" }
	effective := func(c *config) (pipeline.Config, session.Config) {
		s := c.session
		s.Conversations, s.InstanceID, s.ResumeSecret = nil, "fixed", []byte("fixed")
		s = s.WithDefaults()
		s.Conversations = nil
		return c.pipeline.WithDefaults(), s
	}
	def, err := parseFlags(nil, env, io.Discard)
	require.NoError(t, err)
	defP, defS := effective(def)
	fs, _, _ := newFlagSet(&config{}, env, io.Discard)
	checked := 0
	fs.VisitAll(func(f *flag.Flag) {
		c, err := parseFlags([]string{"-" + f.Name, "0"}, env, io.Discard)
		if err != nil || (reflect.DeepEqual(c.pipeline, def.pipeline) && reflect.DeepEqual(c.session, def.session)) {
			return // refused, or not a session or pipeline setting, or 0 already its default
		}
		checked++
		p, s := effective(c)
		if reflect.DeepEqual(p, defP) && reflect.DeepEqual(s, defS) {
			if !zeroSaid.MatchString(f.Usage) {
				t.Errorf("-%s 0 means its default, and its help does not say so", f.Name)
			}
		}
	})
	require.Greater(t, checked, 20)
}
