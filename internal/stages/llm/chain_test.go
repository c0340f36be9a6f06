package llm

import (
	"bytes"
	"cmp"
	"context"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/voiced/voiced/internal/pipeline"
	"github.com/voiced/voiced/internal/stages/llm/llmtest"
	"github.com/voiced/voiced/internal/stages/llm/openai"
	"github.com/voiced/voiced/internal/stages/llm/provider"
)

const testTimeout = 10 * time.Second

// Keys that must never show up in logs, metrics or errors.
const (
	openaiKey    = "sk-proj-OPENAI-SECRET-1234567890"
	backupKey    = "sk-BACKUP-SECRET-0987654321"
	anthropicKey = "sk-ant-ANTHROPIC-SECRET-13579"
	geminiKey    = "AIzaGEMINI-SECRET-24680"
)

var allKeys = []string{openaiKey, backupKey, anthropicKey, geminiKey}

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type testTemplater struct{}

func (testTemplater) Template(in pipeline.Intent, _ string) string {
	if in.Name == "password_reset" {
		return "I can help you reset your password."
	}
	return ""
}

var helpReq = pipeline.GenerateRequest{
	Transcript: "how do I reset my password",
	Intent:     pipeline.Intent{Name: "password_reset", Confidence: 0.92},
	Passages:   []pipeline.Passage{{ID: "kb-1", Title: "Password reset", Text: "Open Settings and choose Security. Click Reset password to get a link by email.", Score: 0.9}},
	History:    []pipeline.Turn{{User: "hi", Assistant: "Hello, how can I help?"}},
}

// testConfig has limits sized for a noisy 2-core machine running -race.
func testConfig() Config {
	pc := ProviderConfig{Cap: 5 * time.Second, TTFTLimit: 250 * time.Millisecond, StartTTFT: 50 * time.Millisecond, StartTPS: 100}
	return Config{
		OpenAI: pc, Anthropic: pc, Gemini: pc,
		StallLimit:     250 * time.Millisecond,
		RetryBaseDelay: 20 * time.Millisecond,
		Reserve:        30 * time.Millisecond,
	}.withDefaults()
}

type fixture struct {
	chain   *Chain
	journal *llmtest.Journal
	servers map[string]*llmtest.Server
	logs    *bytes.Buffer
	reg     *prometheus.Registry
}

// link is one provider of a test chain, served by a scripted fake.
type link struct {
	name   string // journal name; "openai" and "backup" are OpenAI-compatible
	script []llmtest.Reply
}

func newFixture(t *testing.T, cfg Config, links ...link) *fixture {
	t.Helper()
	f := &fixture{journal: &llmtest.Journal{}, servers: map[string]*llmtest.Server{}, logs: &bytes.Buffer{}, reg: prometheus.NewRegistry()}
	client := llmtest.HTTPClient(t)
	var specs []spec
	for _, l := range links {
		srv := llmtest.NewServer(l.name, f.journal, l.script...)
		t.Cleanup(srv.Close)
		f.servers[l.name] = srv
		specs = append(specs, spec{p: newTestProvider(t, l.name, srv.URL, client), cfg: cfg.OpenAI})
	}
	log := slog.New(slog.NewTextHandler(&lockedWriter{buf: f.logs}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	c, err := newChain(cfg, testTemplater{}, log, f.reg, specs)
	require.NoError(t, err)
	f.chain = c
	return f
}

func newTestProvider(t *testing.T, name, url string, client *http.Client) provider.Provider {
	t.Helper()
	switch name {
	case "openai", "backup":
		key := openaiKey
		if name == "backup" {
			key = backupKey
		}
		p, err := openai.New(openai.Config{Name: name, BaseURL: url + "/v1", Model: name + "-model", APIKey: key, HTTPClient: client})
		require.NoError(t, err)
		return p
	}
	return newOtherProvider(t, name, url, client)
}

type outcome struct {
	gen      pipeline.Generation
	err      error
	text     string
	pieces   int
	start    time.Time
	end      time.Time
	deadline time.Time
}

func (f *fixture) generate(t *testing.T, budget time.Duration) outcome {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), budget)
	defer cancel()
	var o outcome
	o.deadline, _ = ctx.Deadline()
	var b strings.Builder
	o.start = time.Now()
	o.gen, o.err = f.chain.Generate(ctx, helpReq, func(p string) { b.WriteString(p); o.pieces++ })
	o.end = time.Now()
	o.text = b.String()
	return o
}

const (
	primaryText = "Open Settings, then Security. Click Reset password."
	backupText  = "Backup says: use the reset link."
)

var extractiveText = "I can help you reset your password. Click Reset password to get a link by email."

func ok(name string) llmtest.Reply {
	if name == "backup" {
		return llmtest.OpenAIOK("backup-model", "Backup says: ", "use the reset link.")
	}
	return llmtest.OpenAIOK("openai-model", "Open Settings, ", "then Security. ", "Click Reset password.")
}

func TestFaultTableOpenAI(t *testing.T) {
	const budget = 1500 * time.Millisecond
	midError := append(llmtest.OpenAIChunks("openai-model", "stop", "Open Settings, ")[:2], llmtest.OpenAIMidStreamError("The server had an error", "server_error"))
	tests := []struct {
		name         string
		primary      []llmtest.Reply
		cfg          func(*Config)
		wantAttempts []string
		wantText     string
		wantProvider string
		wantDegr     []string
		wantErr      error
		minGap       time.Duration // least time between the first two attempts (a honoured wait)
		budget       time.Duration // the generation's budget, when not the default
	}{
		{name: "429 retry-after-ms then ok", primary: []llmtest.Reply{llmtest.OpenAIStatus(429, map[string]string{"retry-after-ms": "150"}, "Rate limit reached", "requests", "rate_limit_exceeded"), ok("openai")},
			wantAttempts: []string{"openai", "openai"}, wantText: primaryText, wantProvider: "openai", minGap: 150 * time.Millisecond},
		{name: "429 retry-after seconds then ok", primary: []llmtest.Reply{llmtest.OpenAIStatus(429, map[string]string{"retry-after": "1"}, "Rate limit reached", "tokens", "rate_limit_exceeded"), ok("openai")},
			// A 1 s wait inside the default 1.5 s budget leaves too thin a
			// margin on a loaded machine: the retry then rightly does
			// not fit, which is not what this row tests.
			wantAttempts: []string{"openai", "openai"}, wantText: primaryText, wantProvider: "openai", minGap: time.Second, budget: 3 * time.Second},
		{name: "429 wait longer than the time left falls back at once", primary: []llmtest.Reply{llmtest.OpenAIStatus(429, map[string]string{"retry-after": "30"}, "Rate limit reached", "requests", "rate_limit_exceeded")},
			wantAttempts: []string{"openai", "backup"}, wantText: backupText, wantProvider: "backup", wantDegr: []string{ReasonProviderFallback}},
		{name: "429 quota: no retry, fall back", primary: []llmtest.Reply{llmtest.OpenAIStatus(429, nil, "You exceeded your current quota", "insufficient_quota", "insufficient_quota")},
			wantAttempts: []string{"openai", "backup"}, wantText: backupText, wantProvider: "backup", wantDegr: []string{ReasonProviderFallback}},
		{name: "500 twice: retry then fall back", primary: []llmtest.Reply{llmtest.OpenAIStatus(500, nil, "The server had an error", "server_error", nil)},
			wantAttempts: []string{"openai", "openai", "backup"}, wantText: backupText, wantProvider: "backup", wantDegr: []string{ReasonProviderFallback}},
		{name: "503 once then ok", primary: []llmtest.Reply{llmtest.Status(503, nil, "Slow Down"), ok("openai")},
			wantAttempts: []string{"openai", "openai"}, wantText: primaryText, wantProvider: "openai"},
		{name: "mid-stream error keeps the text so far", primary: []llmtest.Reply{llmtest.Stream(midError, llmtest.StreamOpts{})},
			wantAttempts: []string{"openai"}, wantText: "Open Settings, ", wantProvider: "openai", wantDegr: []string{ReasonStreamInterrupted}},
		{name: "slow first token is abandoned", primary: []llmtest.Reply{llmtest.Stream(llmtest.OpenAIChunks("openai-model", "stop", "late."), llmtest.StreamOpts{FirstDelay: 5 * time.Second})},
			wantAttempts: []string{"openai", "backup"}, wantText: backupText, wantProvider: "backup", wantDegr: []string{ReasonProviderFallback}},
		{name: "stall mid-stream ends the answer", primary: []llmtest.Reply{llmtest.Stream(llmtest.OpenAIChunks("openai-model", "stop", "Open Settings, ", "never sent."), llmtest.StreamOpts{CutAfter: 2, Cut: llmtest.CutStall})},
			wantAttempts: []string{"openai"}, wantText: "Open Settings, ", wantProvider: "openai", wantDegr: []string{ReasonStreamInterrupted}},
		{name: "400: no retry, no fallback, extractive answer", primary: []llmtest.Reply{llmtest.OpenAIStatus(400, nil, "Invalid 'messages'", "invalid_request_error", nil)},
			wantAttempts: []string{"openai"}, wantText: extractiveText, wantProvider: "extractive", wantDegr: []string{ReasonExtractiveFallback}},
		{name: "401: no fallback by default", primary: []llmtest.Reply{llmtest.OpenAIStatus(401, nil, "Incorrect API key provided: "+openaiKey, "invalid_request_error", "invalid_api_key")},
			wantAttempts: []string{"openai"}, wantText: extractiveText, wantProvider: "extractive", wantDegr: []string{ReasonExtractiveFallback}},
		{name: "401 with auth fallback", primary: []llmtest.Reply{llmtest.OpenAIStatus(401, nil, "Incorrect API key provided", "invalid_request_error", "invalid_api_key")}, cfg: func(c *Config) { c.AuthFallback = true },
			wantAttempts: []string{"openai", "backup"}, wantText: backupText, wantProvider: "backup", wantDegr: []string{ReasonProviderFallback}},
		{name: "content filter is policy_blocked", primary: []llmtest.Reply{llmtest.Stream(llmtest.OpenAIChunks("openai-model", "content_filter"), llmtest.StreamOpts{})},
			wantAttempts: []string{"openai"}, wantText: "", wantProvider: "openai", wantErr: pipeline.ErrPolicyBlocked},
		{name: "refusal is policy_blocked", primary: []llmtest.Reply{llmtest.Stream(llmtest.OpenAIRefusal("openai-model"), llmtest.StreamOpts{})},
			wantAttempts: []string{"openai"}, wantText: "", wantProvider: "openai", wantErr: pipeline.ErrPolicyBlocked},
		{name: "empty answer falls back", primary: []llmtest.Reply{llmtest.Stream(llmtest.OpenAIChunks("openai-model", "stop"), llmtest.StreamOpts{})},
			wantAttempts: []string{"openai", "backup"}, wantText: backupText, wantProvider: "backup", wantDegr: []string{ReasonProviderFallback}},
		{name: "length-truncated before a sentence", primary: []llmtest.Reply{llmtest.Stream(llmtest.OpenAIChunks("openai-model", "length", "Open Settings and"), llmtest.StreamOpts{})},
			wantAttempts: []string{"openai"}, wantText: "Open Settings and", wantProvider: "openai", wantDegr: []string{ReasonTruncated}},
		{name: "malformed stream falls back", primary: []llmtest.Reply{llmtest.Stream([]string{"data: {\"id\":\n\n"}, llmtest.StreamOpts{})},
			wantAttempts: []string{"openai", "backup"}, wantText: backupText, wantProvider: "backup", wantDegr: []string{ReasonProviderFallback}},
		{name: "dropped connection: retry then fall back", primary: []llmtest.Reply{llmtest.Drop()},
			wantAttempts: []string{"openai", "openai", "backup"}, wantText: backupText, wantProvider: "backup", wantDegr: []string{ReasonProviderFallback}},
		{name: "connection dropped mid-stream", primary: []llmtest.Reply{llmtest.Stream(llmtest.OpenAIChunks("openai-model", "stop", "Open Settings, ", "then Security."), llmtest.StreamOpts{CutAfter: 2, Cut: llmtest.CutDrop})},
			wantAttempts: []string{"openai"}, wantText: "Open Settings, ", wantProvider: "openai", wantDegr: []string{ReasonStreamInterrupted}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig()
			if tt.cfg != nil {
				tt.cfg(&cfg)
			}
			f := newFixture(t, cfg, link{"openai", tt.primary}, link{"backup", []llmtest.Reply{ok("backup")}})
			f.check(t, f.generate(t, cmp.Or(tt.budget, budget)), want{attempts: tt.wantAttempts, text: tt.wantText, provider: tt.wantProvider, degr: tt.wantDegr, err: tt.wantErr, minGap: tt.minGap})
		})
	}
}

// assertNoKeys scans logs, metrics and the error for any key.
// want is what one fault-table row expects of the chain.
type want struct {
	attempts []string // server names, in order
	text     string
	provider string
	degr     []string
	err      error
	minGap   time.Duration // least time between the first two attempts (a honoured wait)
}

// check asserts o against w: attempts, text, provider, degradation,
// error, the deadline, the wait between the first two attempts and that
// no key leaked.
func (f *fixture) check(t *testing.T, o outcome, w want) {
	t.Helper()
	require.Equal(t, w.attempts, f.journal.Names(), "attempts")
	require.Equal(t, w.text, o.text)
	require.Equal(t, w.provider, o.gen.Provider)
	require.Equal(t, w.degr, o.gen.Degradation)
	// The answer cites the one passage the request holds, whoever wrote
	// it: a provider was given it as evidence, the extractive responder
	// quotes it.
	if w.err == nil {
		require.Equal(t, helpReq.Passages, o.gen.Sources)
	}
	if w.err != nil {
		require.ErrorIs(t, o.err, w.err)
	} else {
		require.NoError(t, o.err)
	}
	require.True(t, o.end.Before(o.deadline), "returned %v after the deadline", o.end.Sub(o.deadline))
	if w.minGap > 0 {
		rq := f.servers[w.attempts[0]].Requests()
		require.GreaterOrEqual(t, rq[1].At.Sub(rq[0].At), w.minGap)
	}
	assertNoKeys(t, f, o.err)
}

func assertNoKeys(t *testing.T, f *fixture, err error) {
	t.Helper()
	logs := f.logs.String()
	mfs, gerr := f.reg.Gather()
	require.NoError(t, gerr)
	var metrics strings.Builder
	for _, mf := range mfs {
		metrics.WriteString(mf.String())
	}
	for _, k := range allKeys {
		require.NotContains(t, logs, k)
		require.NotContains(t, metrics.String(), k)
		if err != nil {
			require.NotContains(t, err.Error(), k)
		}
	}
}

func TestAuthFailureAlerts(t *testing.T) {
	f := newFixture(t, testConfig(), link{"openai", []llmtest.Reply{llmtest.OpenAIStatus(401, nil, "Incorrect API key provided: "+openaiKey, "invalid_request_error", "invalid_api_key")}}, link{"backup", []llmtest.Reply{ok("backup")}})
	o := f.generate(t, time.Second)
	require.NoError(t, o.err)
	require.Contains(t, f.logs.String(), "level=ERROR")
	require.Contains(t, f.logs.String(), "kind=auth")
	require.Equal(t, 1.0, testutil.ToFloat64(f.chain.m.authFailures.WithLabelValues("openai", "openai-model")))
	require.Equal(t, 1.0, testutil.ToFloat64(f.chain.m.failures.WithLabelValues("openai", "openai-model", "auth")))
	assertNoKeys(t, f, o.err)
}
