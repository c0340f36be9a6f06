// Package remote is a speech engine that asks an OpenAI-compatible
// text-to-speech endpoint (POST {base}/audio/speech with "model", "voice",
// "input" and "response_format": "pcm"), as served by OpenAI,
// Kokoro-FastAPI, LocalAI and speaches, and streams the raw 16-bit mono
// PCM of the response body (24 kHz unless configured otherwise) as it
// arrives.
//
// Failures are *provider.Error values classified like the LLM chain's
// (package llm/provider): HTTP status and error code, a connection error,
// a stream cut before its end, KindTimeout when no audio byte comes
// within the first-byte limit or the stream stalls, and KindMalformed for
// a 200 whose body is JSON or text (an error report, a web page), which is
// never played as audio. The engine makes one
// request per call and never retries: package tts falls back to the
// embedded engine instead. The API key, read from an environment
// variable, is sent as a bearer token and never appears in errors.
package remote

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/voiced/voiced/internal/stages/llm/provider"
	"github.com/voiced/voiced/internal/stages/tts/speech"
)

// Name is the engine's name.
const Name = "remote"

// Config configures the engine. The zero value means the defaults noted
// on each field, except BaseURL, which is required.
type Config struct {
	// BaseURL is the API base including its version path, e.g.
	// "http://localhost:8880/v1"; requests go to BaseURL+"/audio/speech".
	BaseURL string
	// Model is sent as "model"; default "tts-1".
	Model string
	// Voices are the voices offered, the default first; default
	// ["alloy"]. Local servers have their own names ("af_heart").
	Voices []string
	// APIKeyEnv names the environment variable holding the API key, sent
	// as a bearer token when set; default "VOICED_TTS_API_KEY".
	APIKeyEnv string
	// SampleRate is the rate of the server's "pcm" audio; default 24000
	// (OpenAI, Kokoro). Piper voices behind openedai-speech are 22050.
	SampleRate int
	// FirstByte is the longest wait for the first audio byte, and for
	// each later read; default 1s. Past it the call fails with
	// KindTimeout.
	FirstByte time.Duration
}

func (c Config) withDefaults() Config {
	if c.Model == "" {
		c.Model = "tts-1"
	}
	if len(c.Voices) == 0 {
		c.Voices = []string{"alloy"}
	}
	if c.APIKeyEnv == "" {
		c.APIKeyEnv = "VOICED_TTS_API_KEY"
	}
	if c.SampleRate == 0 {
		c.SampleRate = 24000
	}
	if c.FirstByte == 0 {
		c.FirstByte = time.Second
	}
	c.BaseURL = strings.TrimRight(c.BaseURL, "/")
	return c
}

// minChunk is the audio held back before a chunk is emitted, so a server
// that flushes tiny pieces does not cause tiny messages.
const minChunk = 20 * time.Millisecond

// maxInput is OpenAI's limit on "input" in characters.
const maxInput = 4096

// Engine synthesises speech remotely. It is safe for concurrent use.
type Engine struct {
	cfg     Config
	key     string
	client  *http.Client
	filters speech.Filters
}

// New returns a remote engine. client may be nil for a default client
// without its own timeout (the request context is the deadline).
func New(cfg Config, client *http.Client) (*Engine, error) {
	cfg = cfg.withDefaults()
	if cfg.BaseURL == "" {
		return nil, errors.New("remote tts: base URL not set")
	}
	if !strings.HasPrefix(cfg.BaseURL, "http://") && !strings.HasPrefix(cfg.BaseURL, "https://") {
		return nil, errors.New("remote tts: base URL is not http(s)")
	}
	if cfg.SampleRate < 4000 || cfg.SampleRate > 192000 {
		return nil, fmt.Errorf("remote tts: sample rate %d Hz out of range", cfg.SampleRate)
	}
	if client == nil {
		client = &http.Client{}
	}
	// net/http keeps Authorization on a redirect to the same host name
	// whatever its scheme or port: never follow one off the host or down
	// from https, as the LLM providers do not.
	client = provider.SameHostRedirects(client)
	return &Engine{cfg: cfg, key: os.Getenv(cfg.APIKeyEnv), client: client}, nil
}

// Name is "remote".
func (e *Engine) Name() string { return Name }

// OfferedVoices are the voices the engine built from c offers, the
// default first.
func (c Config) OfferedVoices() []string { return c.withDefaults().Voices }

// Voices lists the configured voices, the default first.
func (e *Engine) Voices() []string { return append([]string(nil), e.cfg.Voices...) }

// Warm opens a connection to the server ahead of the first request.
func (e *Engine) Warm(ctx context.Context) error { return provider.Warm(ctx, e.client, e.cfg.BaseURL) }

type speechRequest struct {
	Model          string `json:"model"`
	Voice          string `json:"voice"`
	Input          string `json:"input"`
	ResponseFormat string `json:"response_format"`
}

// Synthesize speaks req.Text and calls emit with each chunk of audio at
// req.SampleRate, in order, from the calling goroutine, as the response
// streams in (emit owns the slice). It returns a nil error only for a
// complete response; every other outcome is a *provider.Error, with the
// Result of the audio emitted before it.
func (e *Engine) Synthesize(ctx context.Context, req speech.Request, emit func(pcm []int16)) (speech.Result, error) {
	start := time.Now()
	res := speech.Result{Engine: Name, Voice: req.Voice, SampleRate: req.SampleRate, TextLen: len(req.Text)}
	if res.Voice == "" {
		res.Voice = e.cfg.Voices[0]
	}
	if !slices.Contains(e.cfg.Voices, res.Voice) {
		return res, fmt.Errorf("remote tts: %w %q (want one of %s)", speech.ErrVoice, res.Voice, strings.Join(e.cfg.Voices, ", "))
	}
	if err := speech.CheckRate(req.SampleRate); err != nil {
		return res, fmt.Errorf("remote tts: %w", err)
	}
	text := strings.TrimSpace(req.Text)
	if text == "" {
		return res, fmt.Errorf("remote tts: %w", speech.ErrEmpty)
	}
	if n := utf8.RuneCountInString(text); n > maxInput {
		return res, &provider.Error{Kind: provider.KindInvalidRequest, Provider: Name, Model: e.cfg.Model,
			Message: fmt.Sprintf("input of %d characters (at most %d)", n, maxInput)}
	}
	res.Chars = len(text)
	out, err := e.filters.NewOutput(e.cfg.SampleRate, minChunk, start, &res, emit)
	if err != nil {
		return res, fmt.Errorf("remote tts: %w", err)
	}
	err = e.stream(ctx, speechRequest{Model: e.cfg.Model, Voice: res.Voice, Input: text, ResponseFormat: "pcm"}, out)
	res.Elapsed = time.Since(start)
	return res, err
}

// stream makes the request and feeds the response body to out. A timer
// cancels the attempt with provider.ErrNoProgress when no audio byte
// comes within FirstByte of the request, or a later read waits longer
// than FirstByte.
func (e *Engine) stream(ctx context.Context, body speechRequest, out *speech.Output) error {
	actx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	watchdog := time.AfterFunc(e.cfg.FirstByte, func() { cancel(provider.ErrNoProgress) })
	defer watchdog.Stop()

	resp, err := e.post(actx, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return e.statusError(resp)
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt == "application/json" || strings.HasSuffix(mt, "+json") || strings.HasPrefix(mt, "text/") {
		// An error reported with a 200, or a web page where the API
		// should be: not audio, and never played as such.
		pe := e.statusError(resp)
		pe.Kind = provider.KindMalformed
		return pe
	}
	buf := make([]byte, 8192)
	var pcm []int16
	odd, have, got := byte(0), false, 0
	for {
		// Only the time spent waiting for the server counts: the watchdog
		// is stopped while a read's audio is processed, and re-armed for
		// the next read (the first read still has what is left of the
		// first-byte limit).
		if got > 0 {
			watchdog.Reset(e.cfg.FirstByte)
		}
		n, rerr := resp.Body.Read(buf)
		if n > 0 {
			watchdog.Stop()
			got += n
			data := buf[:n]
			pcm = pcm[:0]
			if have {
				pcm = append(pcm, int16(uint16(odd)|uint16(data[0])<<8))
				data, have = data[1:], false
			}
			for i := 0; i+1 < len(data); i += 2 {
				pcm = append(pcm, int16(uint16(data[i])|uint16(data[i+1])<<8))
			}
			if len(data)%2 == 1 {
				odd, have = data[len(data)-1], true
			}
			if actx.Err() == nil {
				out.Write(pcm)
			}
		}
		if rerr == io.EOF && actx.Err() == nil {
			break
		}
		if rerr != nil {
			return provider.ReadError(actx, Name, e.cfg.Model, "", rerr)
		}
	}
	if got == 0 {
		return &provider.Error{Kind: provider.KindEmpty, Provider: Name, Model: e.cfg.Model, Message: "no audio in the response"}
	}
	out.Close()
	return nil
}

// post sends the request. A transport failure is an *provider.Error:
// KindTransient, KindTimeout after the watchdog fired, or KindCanceled
// when ctx is done.
func (e *Engine) post(ctx context.Context, body speechRequest) (*http.Response, error) {
	buf, err := json.Marshal(body)
	if err != nil {
		return nil, &provider.Error{Kind: provider.KindInvalidRequest, Provider: Name, Model: e.cfg.Model, Err: err}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.cfg.BaseURL+"/audio/speech", bytes.NewReader(buf))
	if err != nil {
		// The URL comes from configuration; never echo it.
		return nil, &provider.Error{Kind: provider.KindInvalidRequest, Provider: Name, Model: e.cfg.Model, Message: "bad base URL"}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/octet-stream")
	if e.key != "" {
		req.Header.Set("Authorization", "Bearer "+e.key)
	}
	resp, err := e.client.Do(req)
	if err != nil {
		if ue, ok := errors.AsType[*url.Error](err); ok {
			err = ue.Err // the operation and the URL add nothing, and a URL may carry credentials
		}
		kind, cause := provider.ContextError(ctx, err)
		return nil, &provider.Error{Kind: kind, Provider: Name, Model: e.cfg.Model, Err: cause}
	}
	return resp, nil
}

// statusError classifies a failed response. Servers differ in their error
// bodies, so the message is read leniently: error.message (OpenAI,
// LocalAI), detail (FastAPI servers), message, then the raw body.
func (e *Engine) statusError(resp *http.Response) *provider.Error {
	data := provider.ReadErrorBody(resp)
	kind := provider.KindForStatus(resp.StatusCode)
	code, msg := errorBody(data)
	if code == "insufficient_quota" || code == "credit_balance_exhausted" { // OpenAI: out of credit, old and new
		kind = provider.KindQuota
	}
	return &provider.Error{Kind: kind, Provider: Name, Model: e.cfg.Model, Status: resp.StatusCode, Code: provider.RedactCode(code, e.key),
		Message: provider.Redact(msg, e.key), RetryAfter: provider.RetryAfter(resp.Header, time.Now())}
}

func errorBody(data []byte) (code, msg string) {
	var b struct {
		Error *struct {
			Message string          `json:"message"`
			Type    string          `json:"type"`
			Code    json.RawMessage `json:"code"`
		} `json:"error"`
		Detail  json.RawMessage `json:"detail"`
		Message string          `json:"message"`
		Code    json.RawMessage `json:"code"`
	}
	if json.Unmarshal(data, &b) == nil {
		switch {
		case b.Error != nil:
			return firstNonEmpty(rawString(b.Error.Code), b.Error.Type), b.Error.Message
		case len(b.Detail) > 0:
			var s string
			if json.Unmarshal(b.Detail, &s) == nil {
				return "", s
			}
			var d struct{ Error, Message string }
			if json.Unmarshal(b.Detail, &d) == nil && d.Message != "" {
				return d.Error, d.Message
			}
			return "", string(b.Detail)
		case b.Message != "":
			return rawString(b.Code), b.Message
		}
	}
	return "", strings.TrimSpace(string(data))
}

// rawString is a JSON string's value, or the raw text of another value
// (LocalAI sends numeric codes).
func rawString(r json.RawMessage) string {
	var s string
	if json.Unmarshal(r, &s) == nil {
		return s
	}
	if string(r) == "null" {
		return ""
	}
	return string(r)
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
