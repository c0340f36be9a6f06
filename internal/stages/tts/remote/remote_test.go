package remote

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/voiced/voiced/internal/stages/llm/provider"
	"github.com/voiced/voiced/internal/stages/tts/speech"
	"github.com/voiced/voiced/internal/stages/tts/ttstest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	testTimeout = 10 * time.Second
	secretKey   = "sk-test-0123456789abcdef"
)

func newEngine(t *testing.T, srv *ttstest.Server, cfg Config) *Engine {
	t.Helper()
	t.Setenv("VOICED_TTS_TEST_KEY", secretKey)
	cfg.BaseURL = srv.URL + "/v1/"
	cfg.APIKeyEnv = "VOICED_TTS_TEST_KEY"
	e, err := New(cfg, nil)
	require.NoError(t, err)
	return e
}

func collect(ctx context.Context, e *Engine, req speech.Request) ([]int16, speech.Result, error) {
	var got []int16
	res, err := e.Synthesize(ctx, req, func(p []int16) { got = append(got, p...) })
	return got, res, err
}

// The audio arrives exactly as sent, across chunk boundaries that split
// samples, and the request carries what the API wants.
func TestSpeech(t *testing.T) {
	srv := ttstest.New()
	defer srv.Close()
	srv.Key = secretKey
	e := newEngine(t, srv, Config{Model: "kokoro", Voices: []string{"af_heart", "af_sky"}})
	require.Equal(t, []string{"af_heart", "af_sky"}, e.Voices())
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	text := "Your order shipped yesterday."
	var chunks [][]int16
	res, err := e.Synthesize(ctx, speech.Request{Text: "  " + text + "\n", SampleRate: 24000}, func(p []int16) { chunks = append(chunks, p) })
	require.NoError(t, err)
	var got []int16
	for _, c := range chunks {
		require.LessOrEqual(t, len(c), 24000/5, "chunk over 200 ms")
		got = append(got, c...)
	}
	require.Equal(t, ttstest.Audio(text), got)
	require.Equal(t, len(got), res.Samples)
	require.Equal(t, "remote", res.Engine)
	require.Equal(t, "af_heart", res.Voice)
	require.Equal(t, len(text), res.Chars)
	require.Nil(t, res.Words)
	require.Positive(t, res.FirstChunk)
	require.Equal(t, []ttstest.Request{{Model: "kokoro", Voice: "af_heart", Input: text, ResponseFormat: "pcm",
		Authorization: "Bearer " + secretKey}}, srv.Requests())

	// Resampled to 16 kHz: two thirds of the samples.
	got, res, err = collect(ctx, e, speech.Request{Text: text, Voice: "af_sky", SampleRate: 16000})
	require.NoError(t, err)
	require.InDelta(t, len(ttstest.Audio(text))*2/3, len(got), 30)
	require.Equal(t, "af_sky", res.Voice)
}

// The fault table: each failure is classified as the LLM chain's would be,
// sends no audio unless some arrived before it, and never shows the key.
func TestFaults(t *testing.T) {
	srv := ttstest.New()
	defer srv.Close()
	text := "Your order shipped yesterday and should arrive on Friday."
	full := len(ttstest.Audio(text))
	for _, tt := range []struct {
		name       string
		fault      ttstest.Fault
		kind       provider.Kind
		status     int
		code       string
		someAudio  bool
		retryAfter time.Duration
	}{
		{"hang before the first byte", ttstest.Hang, provider.KindTimeout, 0, "", false, 0},
		{"429", ttstest.RateLimited, provider.KindRateLimit, 429, "rate_limit_exceeded", false, 2 * time.Second},
		{"500", ttstest.ServerError, provider.KindTransient, 500, "server_error", false, 0},
		{"401", ttstest.Unauthorized, provider.KindAuth, 401, "invalid_api_key", false, 0},
		{"400", ttstest.BadRequest, provider.KindInvalidRequest, 400, "invalid_request_error", false, 0},
		{"cut mid-way", ttstest.Cut, provider.KindTransient, 0, "", true, 0},
		{"stall mid-way", ttstest.Stall, provider.KindTimeout, 0, "", true, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv.SetFault(tt.fault)
			// The first-byte limit is what the hang waits for; elsewhere it
			// is long, so a machine too busy to answer on loopback in time
			// does not turn the fault into another.
			limit := 5 * time.Second
			switch tt.fault {
			case ttstest.Hang:
				limit = 300 * time.Millisecond
			case ttstest.Stall:
				limit = 2 * time.Second
			}
			e := newEngine(t, srv, Config{FirstByte: limit})
			ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
			defer cancel()
			start := time.Now()
			got, res, err := collect(ctx, e, speech.Request{Text: text, SampleRate: 24000})
			require.Less(t, time.Since(start), limit+2*time.Second, "gave up in time")
			pe, ok := errors.AsType[*provider.Error](err)
			require.True(t, ok, "a *provider.Error, got %v", err)
			require.Equal(t, tt.kind, pe.Kind, err.Error())
			require.Equal(t, tt.status, pe.Status)
			require.Equal(t, tt.code, pe.Code)
			require.Equal(t, tt.retryAfter, pe.RetryAfter)
			require.NotContains(t, err.Error(), secretKey)
			require.Equal(t, len(got), res.Samples)
			if tt.someAudio {
				require.Positive(t, len(got))
				require.Less(t, len(got), full)
				require.Equal(t, ttstest.Audio(text)[:len(got)], got, "what came is the start of the audio")
			} else {
				require.Empty(t, got)
			}
		})
	}
}

// Our own cancellation is KindCanceled with the cause, not the server's
// fault.
func TestCancel(t *testing.T) {
	srv := ttstest.New()
	defer srv.Close()
	srv.SetFault(ttstest.Hang)
	e := newEngine(t, srv, Config{FirstByte: 5 * time.Second})
	ctx, cancel := context.WithCancelCause(t.Context())
	stop := errors.New("barge-in")
	time.AfterFunc(50*time.Millisecond, func() { cancel(stop) })
	_, _, err := collect(ctx, e, speech.Request{Text: "hello", SampleRate: 16000})
	require.Equal(t, provider.KindCanceled, provider.KindOf(err))
	require.ErrorIs(t, err, stop)
}

func TestConnectionRefused(t *testing.T) {
	srv := ttstest.New()
	e := newEngine(t, srv, Config{})
	srv.Close()
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	_, _, err := collect(ctx, e, speech.Request{Text: "hello", SampleRate: 16000})
	require.Equal(t, provider.KindTransient, provider.KindOf(err), err.Error())
	require.NotContains(t, err.Error(), srv.URL)
}

func TestBadRequests(t *testing.T) {
	srv := ttstest.New()
	defer srv.Close()
	e := newEngine(t, srv, Config{})
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	long := make([]byte, maxInput+1)
	for i := range long {
		long[i] = 'a'
	}
	for _, tt := range []struct {
		name string
		req  speech.Request
		want func(error) bool
	}{
		{"unknown voice", speech.Request{Text: "hi", Voice: "slt", SampleRate: 16000}, func(err error) bool { return errors.Is(err, speech.ErrVoice) }},
		{"bad rate", speech.Request{Text: "hi", SampleRate: 12345}, func(err error) bool { return errors.Is(err, speech.ErrRate) }},
		{"blank", speech.Request{Text: "  ", SampleRate: 16000}, func(err error) bool { return errors.Is(err, speech.ErrEmpty) }},
		{"too long", speech.Request{Text: string(long), SampleRate: 16000}, func(err error) bool { return provider.KindOf(err) == provider.KindInvalidRequest }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := collect(ctx, e, tt.req)
			require.True(t, tt.want(err), "%v", err)
		})
	}
	require.Empty(t, srv.Requests(), "nothing sent")
}

func TestNew(t *testing.T) {
	for _, url := range []string{"", "ftp://x/v1", "localhost:8880"} {
		_, err := New(Config{BaseURL: url}, nil)
		require.Error(t, err, url)
	}
	_, err := New(Config{BaseURL: "http://127.0.0.1:1/v1", SampleRate: 100}, nil)
	require.Error(t, err)
}

// Servers differ in their error bodies; the message is found in each.
func TestErrorBodies(t *testing.T) {
	for _, tt := range []struct{ body, code, msg string }{
		{`{"error":{"message":"Incorrect API key","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`, "invalid_api_key", "Incorrect API key"},
		{`{"error":{"message":"bad","type":"invalid_request_error","code":null}}`, "invalid_request_error", "bad"},
		{`{"error":{"code":500,"message":"backend failed","type":""}}`, "500", "backend failed"},
		{`{"detail":{"error":"invalid_model","message":"Unsupported model: x","type":"invalid_request_error"}}`, "invalid_model", "Unsupported model: x"},
		{`{"detail":"Not authenticated"}`, "", "Not authenticated"},
		{`{"detail":[{"loc":["body","input"],"msg":"field required"}]}`, "", `[{"loc":["body","input"],"msg":"field required"}]`},
		{`{"message":"Empty Input","code":400,"type":"BadRequestError"}`, "400", "Empty Input"},
		{"upstream connect error\n", "", "upstream connect error"},
	} {
		code, msg := errorBody([]byte(tt.body))
		require.Equal(t, tt.code, code, tt.body)
		require.Equal(t, tt.msg, msg, tt.body)
	}
}

// A stream cut mid-sentence: playing all the audio that came is not
// hearing the sentence (without word timings, nothing is known heard).
func TestHeardOfCutStream(t *testing.T) {
	srv := ttstest.New()
	defer srv.Close()
	srv.SetFault(ttstest.Cut)
	e := newEngine(t, srv, Config{FirstByte: 5 * time.Second})
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	text := "Your order shipped yesterday and should arrive on Friday."
	_, res, err := collect(ctx, e, speech.Request{Text: text, SampleRate: 24000})
	require.Equal(t, provider.KindTransient, provider.KindOf(err))
	require.Positive(t, res.Samples)
	require.Less(t, res.Samples, len(ttstest.Audio(text)))
	require.Zero(t, res.Heard(res.Audio()), "the end of the sentence never came")
}

// Out of credit is a quota, not a rate limit, under either of OpenAI's
// codes for it: waiting and retrying will not help.
func TestOutOfCreditIsQuota(t *testing.T) {
	for _, code := range []string{"insufficient_quota", "credit_balance_exhausted", "rate_limit_exceeded"} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusTooManyRequests)
			fmt.Fprintf(w, `{"error":{"message":"no","type":"%s","param":null,"code":"%s"}}`, code, code)
		}))
		t.Setenv("VOICED_TTS_TEST_KEY", secretKey)
		e, err := New(Config{BaseURL: srv.URL + "/v1/", APIKeyEnv: "VOICED_TTS_TEST_KEY"}, nil)
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
		_, _, err = collect(ctx, e, speech.Request{Text: "Hello.", SampleRate: 24000})
		cancel()
		srv.Close()
		pe, ok := errors.AsType[*provider.Error](err)
		require.True(t, ok, "a *provider.Error, got %v", err)
		want := provider.KindQuota
		if code == "rate_limit_exceeded" {
			want = provider.KindRateLimit
		}
		require.Equal(t, want, pe.Kind, code)
	}
}

// A server whose error code echoes the key (a proxy quoting the request)
// does not put it into the error: the code is redacted and bounded like
// the message.
func TestErrorCodeRedacted(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprintf(w, `{"error":{"message":"no","type":"auth","code":"bad_key_%s%s"}}`, secretKey, strings.Repeat("x", 200))
	}))
	defer srv.Close()
	t.Setenv("VOICED_TTS_TEST_KEY", secretKey)
	e, err := New(Config{BaseURL: srv.URL + "/v1/", APIKeyEnv: "VOICED_TTS_TEST_KEY"}, nil)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	_, _, err = collect(ctx, e, speech.Request{Text: "Hello.", SampleRate: 24000})
	pe, ok := errors.AsType[*provider.Error](err)
	require.True(t, ok, "a *provider.Error, got %v", err)
	require.NotContains(t, err.Error(), secretKey)
	require.True(t, strings.HasPrefix(pe.Code, "bad_key_[redacted]"), pe.Code)
	require.LessOrEqual(t, len(pe.Code), 64+len("..."))
}
