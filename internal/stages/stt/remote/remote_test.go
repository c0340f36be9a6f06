package remote

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/voiced/voiced/internal/pipeline"
	"github.com/voiced/voiced/internal/stages/stt/sttest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	testTimeout = 10 * time.Second
	testKey     = "sk-test-secret-key-123"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// fakeServer speaks the OpenAI transcription format. It checks each
// request as the real service would and answers with respond.
type fakeServer struct {
	t       *testing.T
	mu      sync.Mutex
	got     []request
	respond func(w http.ResponseWriter, r *http.Request)
}

type request struct {
	model, format, language, auth, filename, ctype string
	pcm                                            []int16
	rate                                           int
}

func (f *fakeServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/audio/transcriptions" {
		http.Error(w, `{"error":{"message":"not found","type":"invalid_request_error"}}`, http.StatusNotFound)
		return
	}
	if err := r.ParseMultipartForm(8 << 20); err != nil {
		w.WriteHeader(http.StatusBadRequest)
		io.WriteString(w, `{"error":{"message":"could not parse multipart form","type":"invalid_request_error","param":null,"code":null}}`)
		return
	}
	file, hdr, err := r.FormFile("file")
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		io.WriteString(w, `{"error":"no 'file' field in the request"}`)
		return
	}
	data, _ := io.ReadAll(file)
	pcm, rate, err := sttest.ParseWAV(data)
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		io.WriteString(w, `{"error":"failed to read audio data"}`)
		return
	}
	f.mu.Lock()
	f.got = append(f.got, request{
		model: r.FormValue("model"), format: r.FormValue("response_format"), language: r.FormValue("language"),
		auth: r.Header.Get("Authorization"), filename: hdr.Filename, ctype: hdr.Header.Get("Content-Type"),
		pcm: pcm, rate: rate,
	})
	f.mu.Unlock()
	f.respond(w, r)
}

func (f *fakeServer) requests() []request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]request(nil), f.got...)
}

func newFake(t *testing.T, respond func(w http.ResponseWriter, r *http.Request)) (*fakeServer, *Engine, *prometheus.Registry) {
	t.Helper()
	f := &fakeServer{t: t, respond: respond}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	t.Setenv("TEST_STT_KEY", testKey)
	reg := prometheus.NewRegistry()
	e, err := New(Config{BaseURL: srv.URL + "/v1/", Model: "whisper-large", APIKeyEnv: "TEST_STT_KEY"}, srv.Client(), quiet, reg)
	require.NoError(t, err)
	return f, e, reg
}

func jsonBody(status int, body string) func(w http.ResponseWriter, r *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		io.WriteString(w, body)
	}
}

func speech() []int16 {
	pcm := make([]int16, 8000)
	for i := range pcm {
		pcm[i] = int16(i%200*100 - 10000)
	}
	return pcm
}

func transcribe(ctx context.Context, e *Engine, pcm []int16, rate int) (string, error) {
	r, err := e.Start(ctx, rate)
	if err != nil {
		return "", err
	}
	defer r.Close()
	for i := 0; i < len(pcm); i += rate / 50 {
		p, err := r.Write(ctx, pcm[i:min(i+rate/50, len(pcm))])
		if err != nil {
			return "", err
		}
		if p != "" {
			panic("remote engine gave a partial")
		}
	}
	return r.Finish(ctx)
}

func TestTranscribes(t *testing.T) {
	f, e, reg := newFake(t, jsonBody(200, `{"text":"  Where is my order?  ","usage":{"type":"duration","seconds":1}}`))
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	pcm := speech()
	got, err := transcribe(ctx, e, pcm, 16000)
	require.NoError(t, err)
	require.Equal(t, "Where is my order?", got)
	reqs := f.requests()
	require.Len(t, reqs, 1)
	r := reqs[0]
	require.Equal(t, "whisper-large", r.model)
	require.Equal(t, "json", r.format)
	require.Equal(t, "en", r.language)
	require.Equal(t, "Bearer "+testKey, r.auth)
	require.Equal(t, "utterance.wav", r.filename)
	require.Equal(t, "audio/wav", r.ctype)
	require.Equal(t, 16000, r.rate)
	require.Equal(t, pcm, r.pcm, "the WAV carries the audio unchanged")
	require.Equal(t, 1.0, testutil.ToFloat64(e.requests.WithLabelValues("ok")))
	_ = reg
}

func TestWhisperCppResponse(t *testing.T) {
	// whisper.cpp's server answers {"text": "..."} with a leading space.
	_, e, _ := newFake(t, jsonBody(200, `{"text":" hello there\n"}`))
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	got, err := transcribe(ctx, e, speech(), 8000)
	require.NoError(t, err)
	require.Equal(t, "hello there", got)
}

func TestErrorMapping(t *testing.T) {
	tests := []struct {
		name    string
		status  int
		body    string
		want    error
		message string
	}{
		{"rate limit", 429, `{"error":{"message":"Rate limit reached for requests. Please try again in 20s.","type":"requests","param":null,"code":"rate_limit_exceeded"}}`, pipeline.ErrRateLimited, "Rate limit reached"},
		{"quota", 429, `{"error":{"message":"You exceeded your current quota.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`, pipeline.ErrUnavailable, "quota"},
		{"overloaded", 503, `{"error":{"message":"Slow Down","type":"server_error"}}`, pipeline.ErrOverloaded, "Slow Down"},
		{"overloaded 529", 529, `{"error":{"message":"Overloaded"}}`, pipeline.ErrOverloaded, "Overloaded"},
		{"server error", 500, `{"error":{"message":"The server had an error","type":"server_error","param":null,"code":null}}`, pipeline.ErrUnavailable, "server had an error"},
		{"bad gateway html", 502, `<html>Bad Gateway</html>`, pipeline.ErrUnavailable, "Bad Gateway"},
		{"auth", 401, `{"error":{"message":"Incorrect API key provided: sk-test-***123.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`, pipeline.ErrUnavailable, "Incorrect API key"},
		{"model", 404, `{"error":{"message":"The model 'whisper-large' does not exist","type":"invalid_request_error","code":"model_not_found"}}`, pipeline.ErrUnavailable, "does not exist"},
		{"bad audio", 400, `{"error":{"message":"Audio file is too short.","type":"invalid_request_error","param":"file","code":"audio_too_short"}}`, pipeline.ErrBadAudio, "too short"},
		{"whisper.cpp error", 400, `{"error":"failed to read audio data"}`, pipeline.ErrBadAudio, "failed to read audio data"},
		{"empty body", 500, ``, pipeline.ErrUnavailable, "empty body"},
		{"too large", 413, `Request Entity Too Large`, pipeline.ErrBadAudio, "Too Large"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, e, _ := newFake(t, jsonBody(tt.status, tt.body))
			ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
			defer cancel()
			_, err := transcribe(ctx, e, speech(), 16000)
			require.ErrorIs(t, err, tt.want)
			require.ErrorContains(t, err, tt.message)
			require.NotContains(t, err.Error(), testKey, "the key never reaches an error")
		})
	}
}

func TestMalformedResponses(t *testing.T) {
	for _, body := range []string{`not json`, `{"txt":"hello"}`, `{"text":42}`, `[{"text":"hi"}]`, ``, `{"text":"unterminated`} {
		t.Run(body, func(t *testing.T) {
			_, e, _ := newFake(t, jsonBody(200, body))
			ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
			defer cancel()
			_, err := transcribe(ctx, e, speech(), 16000)
			require.ErrorIs(t, err, pipeline.ErrUnavailable)
			require.ErrorContains(t, err, "malformed")
		})
	}
	t.Run("huge", func(t *testing.T) {
		_, e, _ := newFake(t, jsonBody(200, `{"text":"`+strings.Repeat("a", 2<<20)+`"}`))
		ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
		defer cancel()
		_, err := transcribe(ctx, e, speech(), 16000)
		require.ErrorIs(t, err, pipeline.ErrUnavailable)
	})
}

// A slow server does not hold the utterance past its deadline.
func TestSlowServerHonoursDeadline(t *testing.T) {
	release := make(chan struct{})
	_, e, _ := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	defer close(release)
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	r, err := e.Start(ctx, 16000)
	require.NoError(t, err)
	_, err = r.Write(ctx, speech())
	require.NoError(t, err)
	fctx, fcancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer fcancel()
	start := time.Now()
	_, err = r.Finish(fctx)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Less(t, time.Since(start), 2*time.Second)
	require.NoError(t, r.Close())
	require.Equal(t, 1.0, testutil.ToFloat64(e.requests.WithLabelValues("canceled")))
}

// A server that sends headers then stalls mid-body is cut off at the
// deadline too.
func TestStalledBody(t *testing.T) {
	release := make(chan struct{})
	_, e, _ := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(200)
		io.WriteString(w, `{"text":"hel`)
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	defer close(release)
	ctx, cancel := context.WithTimeout(t.Context(), 150*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := transcribe(ctx, e, speech(), 16000)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Less(t, time.Since(start), 2*time.Second)
}

func TestConnectionFailures(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	// Nothing listens: connection refused.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	ln.Close()
	e, err := New(Config{BaseURL: "http://" + addr + "/v1"}, nil, quiet, nil)
	require.NoError(t, err)
	_, err = transcribe(ctx, e, speech(), 16000)
	require.ErrorIs(t, err, pipeline.ErrUnavailable)

	// The server drops the connection without answering.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
	}))
	defer srv.Close()
	e, err = New(Config{BaseURL: srv.URL + "/v1"}, srv.Client(), quiet, nil)
	require.NoError(t, err)
	_, err = transcribe(ctx, e, speech(), 16000)
	require.ErrorIs(t, err, pipeline.ErrUnavailable)
}

func TestBadInput(t *testing.T) {
	f, e, _ := newFake(t, jsonBody(200, `{"text":"x"}`))
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	_, err := transcribe(ctx, e, nil, 16000)
	require.ErrorIs(t, err, pipeline.ErrBadAudio, "empty audio is refused without a request")
	_, err = e.Start(ctx, 0)
	require.ErrorIs(t, err, pipeline.ErrBadAudio)
	_, err = transcribe(ctx, e, make([]int16, 16000*61), 16000)
	require.ErrorIs(t, err, pipeline.ErrBadAudio, "longer than MaxUtterance")
	require.Empty(t, f.requests())

	_, err = New(Config{}, nil, quiet, nil)
	require.Error(t, err)
	_, err = New(Config{BaseURL: "ftp://x"}, nil, quiet, nil)
	require.Error(t, err)
}

func TestNoKeyNoHeader(t *testing.T) {
	f := &fakeServer{t: t, respond: jsonBody(200, `{"text":"ok"}`)}
	srv := httptest.NewServer(f)
	defer srv.Close()
	t.Setenv("VOICED_STT_API_KEY", "")
	e, err := New(Config{BaseURL: srv.URL + "/v1"}, srv.Client(), quiet, nil)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	got, err := transcribe(ctx, e, speech(), 16000)
	require.NoError(t, err)
	require.Equal(t, "ok", got)
	require.Empty(t, f.requests()[0].auth)
	require.Equal(t, "whisper-1", f.requests()[0].model)
}
