// Package remote is an STT engine that sends each utterance to an
// OpenAI-compatible transcription endpoint (POST {base}/audio/transcriptions,
// multipart/form-data with the audio as a WAV file), as spoken by OpenAI,
// whisper.cpp's server (with --inference-path), speaches
// (faster-whisper-server) and LocalAI.
//
// These services transcribe whole files, so the recogniser buffers the
// utterance and sends it when it is finished; it gives no partial
// transcripts. HTTP failures are mapped to the pipeline's error kinds:
// 429 to ErrRateLimited (out of credit: ErrUnavailable), 503 and 529 to
// ErrOverloaded, 400, 413 and 415 to ErrBadAudio (a 400 that names a
// parameter other than the file: ErrUnavailable), everything else (auth,
// missing model, 5xx, connection errors, malformed responses) to
// ErrUnavailable. The request's context bounds the whole exchange.
package remote

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/voiced/voiced/internal/pipeline"
	"github.com/voiced/voiced/internal/stages/llm/provider"
	"github.com/voiced/voiced/internal/wav"
)

// Config configures the remote engine. The zero value means the defaults
// noted on each field, except BaseURL, which is required.
type Config struct {
	// BaseURL is the API base including its version path, e.g.
	// "http://localhost:8000/v1"; the request goes to
	// BaseURL + "/audio/transcriptions".
	BaseURL string
	// Model is sent as the "model" field; default "whisper-1".
	Model string
	// APIKeyEnv names the environment variable holding the API key, sent
	// as a bearer token when set; default "VOICED_STT_API_KEY".
	APIKeyEnv string
	// Language is an ISO-639-1 hint; default "en".
	Language string
	// MaxUtterance is the longest audio accepted; default 60 s.
	MaxUtterance time.Duration
	// MaxResponse bounds the response body read; default 1 MiB.
	MaxResponse int64
}

func (c Config) withDefaults() Config {
	if c.Model == "" {
		c.Model = "whisper-1"
	}
	if c.APIKeyEnv == "" {
		c.APIKeyEnv = "VOICED_STT_API_KEY"
	}
	if c.Language == "" {
		c.Language = "en"
	}
	if c.MaxUtterance == 0 {
		c.MaxUtterance = 60 * time.Second
	}
	if c.MaxResponse == 0 {
		c.MaxResponse = 1 << 20
	}
	c.BaseURL = strings.TrimRight(c.BaseURL, "/")
	return c
}

// Engine transcribes utterances remotely. It satisfies pipeline.Transcriber.
type Engine struct {
	cfg      Config
	key      string
	client   *http.Client
	log      *slog.Logger
	requests *prometheus.CounterVec
	latency  prometheus.Histogram
}

var _ pipeline.Transcriber = (*Engine)(nil)

// New returns a remote engine. client may be nil for a default client
// without its own timeout (the request context is the deadline).
func New(cfg Config, client *http.Client, log *slog.Logger, reg prometheus.Registerer) (*Engine, error) {
	cfg = cfg.withDefaults()
	if cfg.BaseURL == "" {
		return nil, errors.New("remote stt: base URL not set")
	}
	if !strings.HasPrefix(cfg.BaseURL, "http://") && !strings.HasPrefix(cfg.BaseURL, "https://") {
		// Not quoted: a URL can carry credentials (user:key@, ?key=).
		return nil, errors.New("remote stt: base URL (-stt.remote.url) is not http(s)")
	}
	if u, err := url.Parse(cfg.BaseURL); err != nil || u.Host == "" {
		// Not the parser's words either: they quote the URL raw.
		return nil, errors.New("remote stt: base URL (-stt.remote.url) is not a valid URL")
	}
	if cfg.MaxUtterance < 0 || cfg.MaxResponse < 0 {
		return nil, fmt.Errorf("remote stt: longest utterance %v, response limit %d: want >= 0", cfg.MaxUtterance, cfg.MaxResponse)
	}
	if client == nil {
		client = &http.Client{}
	}
	// net/http keeps Authorization on a redirect to the same host name
	// whatever its scheme or port: never follow one off the host or down
	// from https.
	client = provider.SameHostRedirects(client)
	e := &Engine{cfg: cfg, key: os.Getenv(cfg.APIKeyEnv), client: client, log: log,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "voiced_stt_remote_requests_total",
			Help: "Remote transcription requests by outcome."}, []string{"outcome"}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "voiced_stt_remote_seconds",
			Help: "Remote transcription request latency.", Buckets: prometheus.ExponentialBuckets(0.05, 2, 9)}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{e.requests, e.latency} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("remote stt: register metrics: %w", err)
			}
		}
	}
	return e, nil
}

// Ready is always true: the remote service is checked per request.
func (e *Engine) Ready() bool { return true }

// Close releases nothing; it is here to match the embedded engine.
func (e *Engine) Close() error { return nil }

// Start begins an utterance at sampleRate Hz.
func (e *Engine) Start(ctx context.Context, sampleRate int) (pipeline.Recognizer, error) {
	if sampleRate < 4000 || sampleRate > 192000 {
		return nil, fmt.Errorf("remote stt: sample rate %d Hz out of range: %w", sampleRate, pipeline.ErrBadAudio)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return &recognizer{e: e, rate: sampleRate, max: int(e.cfg.MaxUtterance.Seconds() * float64(sampleRate))}, nil
}

type recognizer struct {
	e    *Engine
	rate int
	max  int
	pcm  []int16
	done bool
}

// Write buffers the audio; remote engines give no partials.
func (r *recognizer) Write(ctx context.Context, pcm []int16) (string, error) {
	if r.done {
		return "", errors.New("remote stt: write after finish")
	}
	if len(r.pcm)+len(pcm) > r.max {
		return "", fmt.Errorf("remote stt: utterance longer than %v: %w", r.e.cfg.MaxUtterance, pipeline.ErrBadAudio)
	}
	r.pcm = append(r.pcm, pcm...)
	return "", ctx.Err()
}

// Finish sends the utterance and returns the transcript.
func (r *recognizer) Finish(ctx context.Context) (string, error) {
	if r.done {
		return "", errors.New("remote stt: finish called twice")
	}
	r.done = true
	if len(r.pcm) == 0 {
		return "", fmt.Errorf("remote stt: no audio in utterance: %w", pipeline.ErrBadAudio)
	}
	return r.e.transcribe(ctx, wav.Encode(r.pcm, r.rate))
}

func (r *recognizer) Close() error {
	r.pcm = nil
	return nil
}

func (e *Engine) transcribe(ctx context.Context, file []byte) (string, error) {
	start := time.Now()
	text, outcome, err := e.do(ctx, file)
	e.requests.WithLabelValues(outcome).Inc()
	e.latency.Observe(time.Since(start).Seconds())
	return text, err
}

// do sends one utterance and returns its transcript, with the outcome
// transcribe counts it under.
func (e *Engine) do(ctx context.Context, file []byte) (text, outcome string, err error) {
	body, contentType, err := e.form(file)
	if err != nil {
		return "", "error", fmt.Errorf("remote stt: %w", err)
	}
	resp, outcome, err := e.post(ctx, body, contentType)
	if err != nil {
		return "", outcome, err
	}
	defer resp.Body.Close()
	return e.result(ctx, resp)
}

// form is the multipart body of a transcription request for the WAV file,
// and its content type.
func (e *Engine) form(file []byte) (body *bytes.Buffer, contentType string, err error) {
	body = new(bytes.Buffer)
	mw := multipart.NewWriter(body)
	h := textproto.MIMEHeader{}
	h.Set("Content-Disposition", `form-data; name="file"; filename="utterance.wav"`)
	h.Set("Content-Type", "audio/wav")
	fw, err := mw.CreatePart(h)
	if err != nil {
		return nil, "", err
	}
	fw.Write(file)
	for _, f := range [][2]string{{"model", e.cfg.Model}, {"response_format", "json"}, {"language", e.cfg.Language}} {
		if err := mw.WriteField(f[0], f[1]); err != nil {
			return nil, "", err
		}
	}
	if err := mw.Close(); err != nil {
		return nil, "", err
	}
	return body, mw.FormDataContentType(), nil
}

// post sends the request and classifies a failure to get a response: the
// outcome is canceled when ctx ended, unavailable otherwise, and error for
// a URL that does not parse. Its errors never carry the URL, which can
// hold a credential. body is a bytes.Buffer so that the request can be
// replayed on a redirect (http.Request.GetBody).
func (e *Engine) post(ctx context.Context, body *bytes.Buffer, contentType string) (resp *http.Response, outcome string, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.cfg.BaseURL+"/audio/transcriptions", body)
	if err != nil {
		// Never the parser's error: it quotes the URL, credentials and all.
		return nil, "error", fmt.Errorf("remote stt: bad base URL (-stt.remote.url): %w", pipeline.ErrUnavailable)
	}
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("Accept", "application/json")
	if e.key != "" {
		req.Header.Set("Authorization", "Bearer "+e.key)
	}
	resp, err = e.client.Do(req)
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, "canceled", fmt.Errorf("remote stt: %w", ctxErr)
		}
		// The URL is left out: an operator may give a gateway's token as
		// its user (https://TOKEN@host/v1), which net/http does not mask.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = fmt.Errorf("%s: %w", ue.Op, ue.Err)
		}
		return nil, "unavailable", fmt.Errorf("remote stt: request failed: %w: %w", err, pipeline.ErrUnavailable)
	}
	return resp, "", nil
}

// result reads the response, at most MaxResponse bytes of it, and returns
// the transcript, or the error its status, size or content makes it.
func (e *Engine) result(ctx context.Context, resp *http.Response) (text, outcome string, err error) {
	data, err := io.ReadAll(io.LimitReader(resp.Body, e.cfg.MaxResponse+1))
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return "", "canceled", fmt.Errorf("remote stt: %w", ctxErr)
		}
		if resp.StatusCode == http.StatusOK {
			return "", "unavailable", fmt.Errorf("remote stt: reading response: %w: %w", err, pipeline.ErrUnavailable)
		}
		// A failure's class is its status: an error page cut short
		// (a gateway resetting the connection) is classified by what
		// arrived.
	}
	if resp.StatusCode != http.StatusOK {
		// The status decides, whatever the size of the body (a gateway's
		// error page may be larger than MaxResponse).
		data = data[:min(int64(len(data)), e.cfg.MaxResponse)]
		msg, param := errorDetail(data, e.key)
		outcome, kind := classify(resp.StatusCode, data, param)
		return "", outcome, fmt.Errorf("remote stt: HTTP %d: %s: %w", resp.StatusCode, msg, kind)
	}
	if int64(len(data)) > e.cfg.MaxResponse {
		return "", "malformed", fmt.Errorf("remote stt: response larger than %d bytes: %w", e.cfg.MaxResponse, pipeline.ErrUnavailable)
	}
	var out struct {
		Text *string `json:"text"`
	}
	if err := json.Unmarshal(data, &out); err != nil || out.Text == nil {
		return "", "malformed", fmt.Errorf("remote stt: malformed response (want JSON with \"text\"): %w", pipeline.ErrUnavailable)
	}
	return strings.Join(strings.Fields(*out.Text), " "), "ok", nil
}

// classify maps a failed response to a pipeline error kind; param is
// its error body's "param" (errorDetail).
func classify(status int, body []byte, param string) (outcome string, kind error) {
	switch status {
	case http.StatusTooManyRequests:
		// Out of credit is not a rate limit: waiting will not help.
		// OpenAI's newer code for it is credit_balance_exhausted.
		if b := string(body); strings.Contains(b, "insufficient_quota") || strings.Contains(b, "credit_balance_exhausted") {
			return "quota", pipeline.ErrUnavailable
		}
		return "rate_limited", pipeline.ErrRateLimited
	case http.StatusServiceUnavailable, 529:
		return "overloaded", pipeline.ErrOverloaded
	case http.StatusBadRequest:
		// A 400 naming a parameter other than the file (model,
		// language, response_format) is our configuration's fault, not
		// the caller's audio.
		if param != "" && param != "file" {
			return "unavailable", pipeline.ErrUnavailable
		}
		return "bad_audio", pipeline.ErrBadAudio
	case http.StatusRequestEntityTooLarge, http.StatusUnsupportedMediaType:
		return "bad_audio", pipeline.ErrBadAudio
	}
	return "unavailable", pipeline.ErrUnavailable
}

// errorDetail extracts the message of an OpenAI-style error body
// ({"error":{"message":...,"param":...}}, with its param) or a
// whisper.cpp one ({"error":"..."}),
// shortened, with key taken out: a server or gateway may echo the
// credential it refused, and the error is logged.
func errorDetail(body []byte, key string) (msg, param string) {
	var oa struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(body, &oa) == nil && len(oa.Error) > 0 {
		var s string
		var obj struct {
			Message string          `json:"message"`
			Param   json.RawMessage `json:"param"` // a string, null, or what a gateway makes of it
		}
		switch {
		case json.Unmarshal(oa.Error, &s) == nil:
			msg = s
		case json.Unmarshal(oa.Error, &obj) == nil:
			msg = obj.Message
			_ = json.Unmarshal(obj.Param, &param) // not a string: none
		}
	}
	if msg == "" {
		msg = strings.TrimSpace(string(body))
	}
	if msg == "" {
		return "(empty body)", param
	}
	msg = provider.Redact(msg, key) // before the cut below, which could halve the key
	if len(msg) > 200 {
		msg = strings.ToValidUTF8(msg[:200], "") + "..." // no half character
	}
	return msg, param
}
