package tts

import (
	"context"
	"errors"
	"flag"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/voiced/voiced/internal/stages/tts/remote"
	"github.com/voiced/voiced/internal/stages/tts/ttstest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const testTimeout = 10 * time.Second

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func TestSpeedLearns(t *testing.T) {
	s := newSpeed(200, 0.5)
	require.Equal(t, 500*time.Millisecond, timeFor(100, s.get()))
	s.observe(100, 100*time.Millisecond) // 1000 chars/s
	require.InDelta(t, 600, s.get(), 1e-9)
	s.observe(100, 100*time.Millisecond)
	require.InDelta(t, 800, s.get(), 1e-9)
	s.observe(3, time.Microsecond) // too short to say anything
	s.observe(100, 0)
	require.InDelta(t, 800, s.get(), 1e-9)
	s.observe(1000000, 10*time.Millisecond) // capped
	require.LessOrEqual(t, s.get(), float64(maxCPS))
	require.Equal(t, 80, charsIn(100*time.Millisecond, 800))
	require.Zero(t, charsIn(-time.Second, 800))
	require.Zero(t, timeFor(0, 800))
	require.Zero(t, timeFor(10, 0))
}

func TestFlags(t *testing.T) {
	var c Config
	fs := flag.NewFlagSet("voiced", flag.ContinueOnError)
	c.RegisterFlags(fs)
	require.NoError(t, fs.Parse([]string{"-tts.engine", "remote", "-tts.voice", "nova", "-tts.remote.url", "http://127.0.0.1:8880/v1",
		"-tts.remote.voices", "nova, alloy,", "-tts.remote.first-byte", "700ms", "-tts.parallel", "3"}))
	require.Equal(t, "remote", c.Engine)
	require.Equal(t, "nova", c.Voice)
	require.Equal(t, 3, c.Flite.Parallel)
	require.Equal(t, remote.Config{BaseURL: "http://127.0.0.1:8880/v1", Model: "tts-1", Voices: []string{"nova", "alloy"},
		APIKeyEnv: "VOICED_TTS_API_KEY", SampleRate: 24000, FirstByte: 700 * time.Millisecond}, c.Remote)
	require.Equal(t, 10*time.Second, c.Cooldown)
}

func TestUnknownEngine(t *testing.T) {
	_, err := New(Config{Engine: "espeak"}, quiet, nil)
	require.ErrorContains(t, err, `unknown engine "espeak" (want flite or remote)`)
}

// fakeSynth stands in for Flite: 100 ms of audio per call, at the speed
// the engine assumes for Flite.
type fakeSynth struct {
	mu     sync.Mutex
	voices []string
	calls  []Request
}

func (f *fakeSynth) Name() string     { return "flite" }
func (f *fakeSynth) Voices() []string { return f.voices }
func (f *fakeSynth) Synthesize(ctx context.Context, req Request, emit func([]int16)) (Result, error) {
	f.mu.Lock()
	f.calls = append(f.calls, req)
	f.mu.Unlock()
	if req.Voice == "" {
		req.Voice = f.voices[0]
	}
	n := req.SampleRate / 10
	emit(make([]int16, n))
	return Result{Engine: "flite", Voice: req.Voice, SampleRate: req.SampleRate, Samples: n, Chunks: 1, Chars: len(req.Text),
		TextLen: len(req.Text), Complete: ctx.Err() == nil, Elapsed: time.Duration(len(req.Text)) * time.Second / 200}, ctx.Err()
}

func (f *fakeSynth) requests() []Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Request(nil), f.calls...)
}

// newRemoteEngine is an Engine of the real remote engine against the fake
// server, falling back to a fake Flite.
func newRemoteEngine(t *testing.T, srv *ttstest.Server, cfg Config) (*Engine, *fakeSynth, *prometheus.Registry) {
	t.Helper()
	cfg.Remote.BaseURL = srv.URL + "/v1"
	cfg.Remote.Voices = []string{"alloy", "nova"}
	r, err := remote.New(cfg.Remote, nil)
	require.NoError(t, err)
	reg := prometheus.NewRegistry()
	m, err := newMetrics(reg)
	require.NoError(t, err)
	sec := &fakeSynth{voices: []string{"slt", "kal"}}
	e := &Engine{name: EngineRemote, alpha: 0.2, m: m, speeds: map[string]*speed{}, voices: r.Voices()}
	e.syn = newFallback(r, sec, cfg.Cooldown, e.observe, e.estimate, m)
	return e, sec, reg
}

const sentence = "Your order shipped yesterday."

// Each fault of the remote engine either falls back to the embedded
// engine (which then speaks the whole sentence) or, once audio went out,
// ends the sentence there.
func TestFallback(t *testing.T) {
	for _, tt := range []struct {
		name     string
		fault    ttstest.Fault
		engine   string // who spoke
		kind     string // fallback kind, "" for none
		wantErr  bool
		cooldown bool // the remote is skipped afterwards
	}{
		{"ok", ttstest.OK, "remote", "", false, false},
		{"hang before the first byte", ttstest.Hang, "flite", "timeout", false, true},
		{"429", ttstest.RateLimited, "flite", "rate_limit", false, true},
		{"500", ttstest.ServerError, "flite", "transient", false, true},
		{"401", ttstest.Unauthorized, "flite", "auth", false, true},
		{"400", ttstest.BadRequest, "flite", "invalid_request", false, false},
		{"cut mid-way", ttstest.Cut, "remote", "", true, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := ttstest.New()
			defer srv.Close()
			srv.SetFault(tt.fault)
			limit := 5 * time.Second // long, so a busy machine does not turn a fault into a timeout
			if tt.fault == ttstest.Hang {
				limit = 300 * time.Millisecond
			}
			e, sec, reg := newRemoteEngine(t, srv, Config{Remote: remote.Config{FirstByte: limit}})
			ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
			defer cancel()
			var samples int
			res, err := e.Synthesize(ctx, Request{Text: sentence, Voice: "nova", SampleRate: 16000}, func(p []int16) { samples += len(p) })
			require.Equal(t, tt.wantErr, err != nil, "%v", err)
			require.Equal(t, tt.engine, res.Engine)
			require.Equal(t, res.Samples, samples, "the audio emitted is the audio reported")
			require.Len(t, srv.Requests(), 1, "the remote engine is never retried")
			if tt.kind != "" {
				require.Equal(t, []Request{{Text: sentence, SampleRate: 16000}}, sec.requests(), "the fallback speaks in its default voice")
				require.Equal(t, 1.0, testutil.ToFloat64(e.m.fallbacks.WithLabelValues("remote", tt.kind)))
				require.Equal(t, 1.0, testutil.ToFloat64(e.m.failures.WithLabelValues("remote", tt.kind)))
			} else {
				require.Empty(t, sec.requests())
				require.Zero(t, testutil.CollectAndCount(e.m.fallbacks))
			}
			if tt.wantErr {
				require.Positive(t, samples, "the audio before the cut was sent")
				require.Equal(t, 1.0, testutil.ToFloat64(e.m.failures.WithLabelValues("remote", "transient")))
			}
			require.Positive(t, testutil.ToFloat64(e.m.chunks.WithLabelValues(tt.engine)))

			// The next sentence: skipped remote during the cooldown.
			srv.SetFault(ttstest.OK)
			res, err = e.Synthesize(ctx, Request{Text: sentence, SampleRate: 16000}, func([]int16) {})
			require.NoError(t, err)
			if tt.cooldown {
				require.Equal(t, "flite", res.Engine)
				require.Equal(t, 1.0, testutil.ToFloat64(e.m.fallbacks.WithLabelValues("remote", "cooldown")))
				eng, _ := e.route("")
				require.Equal(t, "flite", eng, "estimates follow the engine that will speak")
			} else {
				require.Equal(t, "remote", res.Engine)
			}
			_, err = testutil.GatherAndCount(reg)
			require.NoError(t, err)
		})
	}
}

// With a deadline, the remote engine gets only the time the fallback
// does not need: a hanging server is abandoned early enough for the
// embedded engine to speak before the deadline.
func TestFallbackKeepsTimeForEmbedded(t *testing.T) {
	srv := ttstest.New()
	defer srv.Close()
	srv.SetFault(ttstest.Hang)
	e, sec, _ := newRemoteEngine(t, srv, Config{Remote: remote.Config{FirstByte: 5 * time.Second}, Cooldown: -1})
	// The embedded engine is expected to need 29 chars / 200 cps = 145 ms.
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	start := time.Now()
	res, err := e.Synthesize(ctx, Request{Text: sentence, SampleRate: 16000}, func([]int16) {})
	require.NoError(t, err, "the embedded engine spoke before the deadline")
	require.Equal(t, "flite", res.Engine)
	require.Greater(t, time.Since(start), 600*time.Millisecond, "waited for the remote engine as long as it could")
	require.Len(t, sec.requests(), 1)
	require.Equal(t, 1.0, testutil.ToFloat64(e.m.fallbacks.WithLabelValues("remote", "timeout")))

	// Less time left than the embedded engine needs: straight to it.
	short, cancelShort := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancelShort()
	res, err = e.Synthesize(short, Request{Text: sentence, SampleRate: 16000}, func([]int16) {})
	require.NoError(t, err)
	require.Equal(t, "flite", res.Engine)
	require.Len(t, srv.Requests(), 1, "the remote engine was not asked")
	require.Equal(t, 1.0, testutil.ToFloat64(e.m.fallbacks.WithLabelValues("remote", "no_time")))
}

// Our own cancellation does not fall back.
func TestFallbackNotOnCancel(t *testing.T) {
	srv := ttstest.New()
	defer srv.Close()
	srv.SetFault(ttstest.Hang)
	e, sec, _ := newRemoteEngine(t, srv, Config{Remote: remote.Config{FirstByte: 5 * time.Second}})
	ctx, cancel := context.WithCancelCause(t.Context())
	stop := errors.New("barge-in")
	time.AfterFunc(50*time.Millisecond, func() { cancel(stop) })
	_, err := e.Synthesize(ctx, Request{Text: sentence, SampleRate: 16000}, func([]int16) {})
	require.ErrorIs(t, err, stop)
	require.Empty(t, sec.requests())
	require.Equal(t, 1.0, testutil.ToFloat64(e.m.failures.WithLabelValues("remote", "canceled")))
}

// The learned speed moves estimates, per engine and voice.
func TestEstimateLearns(t *testing.T) {
	srv := ttstest.New()
	defer srv.Close()
	// A first-byte limit a loaded machine cannot trip: a fallback to
	// flite would teach the wrong engine.
	e, _, _ := newRemoteEngine(t, srv, Config{Remote: remote.Config{FirstByte: testTimeout}})
	before := e.Estimate("", 100)
	require.Equal(t, timeFor(100, initialCPS[EngineRemote]), before)
	require.Equal(t, before, e.Estimate("alloy", 100))
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	cps := initialCPS[EngineRemote]
	for range 5 {
		res, err := e.Synthesize(ctx, Request{Text: sentence, SampleRate: 16000}, func([]int16) {})
		require.NoError(t, err)
		require.Equal(t, EngineRemote, res.Engine)
		cps += 0.2 * (min(float64(res.Chars)/res.Elapsed.Seconds(), maxCPS) - cps)
	}
	require.Equal(t, timeFor(100, cps), e.Estimate("", 100), "the moving average of what was seen")
	require.Equal(t, charsIn(time.Second, cps), e.CharsIn("", time.Second))
	require.Equal(t, before, e.Estimate("nova", 100), "another voice learns on its own")
	require.Equal(t, charsIn(time.Second, initialCPS[EngineRemote]), e.CharsIn("nova", time.Second))
}

// A 429's Retry-After keeps the remote engine skipped longer than the
// cooldown.
func TestFallbackRetryAfter(t *testing.T) {
	srv := ttstest.New()
	defer srv.Close()
	srv.SetFault(ttstest.RateLimited)
	e, _, _ := newRemoteEngine(t, srv, Config{Cooldown: time.Millisecond})
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	start := time.Now()
	res, err := e.Synthesize(ctx, Request{Text: sentence, SampleRate: 16000}, func([]int16) {})
	require.NoError(t, err)
	require.Equal(t, "flite", res.Engine)
	until := time.Unix(0, e.syn.(*fallback).skipUntil.Load())
	require.WithinRange(t, until, start.Add(2*time.Second), time.Now().Add(2*time.Second), "skipped for the server's Retry-After: 2")
}
