// Package openai is the voiced adapter for OpenAI Chat Completions
// streaming and the OpenAI-compatible servers (Ollama, llama.cpp server,
// vLLM). It speaks the wire format with plain net/http and never retries:
// the chain in package llm owns retries and fallback.
//
// Known differences handled: which max-tokens field a server reads
// (MaxTokensField), error codes that are strings (OpenAI) or integers
// (vLLM, llama.cpp), mid-stream errors sent as a data event with a
// top-level "error" key, and streams cut before "data: [DONE]", which are
// failures, never a short success.
package openai

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/voiced/voiced/internal/stages/llm/provider"
	"github.com/voiced/voiced/internal/stages/llm/sse"
)

// DefaultBaseURL is OpenAI's API base.
const DefaultBaseURL = "https://api.openai.com/v1"

// Max-tokens field choices.
const (
	FieldMaxCompletionTokens = "max_completion_tokens" // OpenAI (required by reasoning models), vLLM, new llama.cpp
	FieldMaxTokens           = "max_tokens"            // Ollama, older llama.cpp, vLLM
	FieldBoth                = "both"
)

// Config configures one OpenAI-compatible endpoint and model. The zero
// value (plus APIKey) means OpenAI's API with gpt-4o-mini.
type Config struct {
	// Name names the provider in logs and metrics. Default "openai".
	Name string
	// BaseURL is the API base, the part before "/chat/completions", as
	// OPENAI_BASE_URL gives it (usually ending in /v1). A bare host
	// (no path) gets /v1, where OpenAI, Ollama, llama.cpp's server and
	// vLLM serve it. Default DefaultBaseURL.
	BaseURL string
	// Model defaults to "gpt-4o-mini".
	Model string
	// APIKey is sent as "Authorization: Bearer"; empty sends none (Ollama).
	APIKey string
	// MaxTokensField is the request field that carries the output cap:
	// FieldMaxCompletionTokens, FieldMaxTokens or FieldBoth. Default:
	// max_completion_tokens for OpenAI's own base URL, max_tokens for any
	// other (Ollama ignores max_completion_tokens).
	MaxTokensField string
	// HTTPClient defaults to http.DefaultClient. Its Timeout should be 0:
	// the request's context carries the deadline.
	HTTPClient *http.Client
}

func (c Config) withDefaults() Config {
	c.Name = cmp.Or(c.Name, "openai")
	c.BaseURL = provider.HostOnlyBase(cmp.Or(c.BaseURL, DefaultBaseURL), "v1")
	c.Model = cmp.Or(c.Model, "gpt-4o-mini")
	if c.MaxTokensField == "" {
		c.MaxTokensField = FieldMaxTokens
		if c.BaseURL == DefaultBaseURL {
			c.MaxTokensField = FieldMaxCompletionTokens
		}
	}
	if c.HTTPClient == nil {
		c.HTTPClient = http.DefaultClient
	}
	return c
}

// Client streams chat completions from one endpoint and model.
type Client struct {
	cfg Config
}

var (
	_ provider.Provider = (*Client)(nil)
	_ provider.Warmer   = (*Client)(nil)
)

// New returns a client. It returns an error for an unknown MaxTokensField.
func New(cfg Config) (*Client, error) {
	cfg = cfg.withDefaults()
	if err := CheckMaxTokensField(cfg.MaxTokensField); err != nil {
		return nil, err
	}
	return &Client{cfg: cfg}, nil
}

// CheckMaxTokensField refuses a MaxTokensField that is not one of the
// Field constants ("" is the default's, chosen by the base URL).
func CheckMaxTokensField(f string) error {
	switch f {
	case "", FieldMaxCompletionTokens, FieldMaxTokens, FieldBoth:
		return nil
	}
	return errors.New("openai: max tokens field must be max_completion_tokens, max_tokens or both, not " + strconv.Quote(f))
}

// BaseURL is the API base requests go to.
func (c *Client) BaseURL() string { return c.cfg.BaseURL }

// Warm implements provider.Warmer.
func (c *Client) Warm(ctx context.Context) error {
	return provider.Warm(ctx, c.cfg.HTTPClient, c.cfg.BaseURL+"/")
}

// Name implements provider.Provider.
func (c *Client) Name() string { return c.cfg.Name }

// Model implements provider.Provider.
func (c *Client) Model() string { return c.cfg.Model }

type message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

type request struct {
	Model               string         `json:"model"`
	Messages            []message      `json:"messages"`
	Stream              bool           `json:"stream"`
	StreamOptions       map[string]any `json:"stream_options,omitempty"`
	MaxCompletionTokens int            `json:"max_completion_tokens,omitempty"`
	MaxTokens           int            `json:"max_tokens,omitempty"`
}

// apiError is the error object; code is a string (OpenAI) or an integer
// (vLLM, llama.cpp), so it stays raw.
type apiError struct {
	Message string          `json:"message"`
	Type    string          `json:"type"`
	Code    json.RawMessage `json:"code"`
}

func (e *apiError) code() string {
	if len(e.Code) == 0 || string(e.Code) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(e.Code, &s) == nil {
		return s
	}
	return string(e.Code) // an integer
}

type chunk struct {
	ID      string    `json:"id"`
	Model   string    `json:"model"`
	Error   *apiError `json:"error"`
	Choices []struct {
		Delta struct {
			Content *string `json:"content"`
			Refusal *string `json:"refusal"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
}

// Stream implements provider.Provider.
func (c *Client) Stream(ctx context.Context, req *provider.Request, onText func(string)) (provider.Result, error) {
	start := time.Now()
	res := provider.Result{Provider: c.cfg.Name, Model: c.cfg.Model}
	body := request{
		Model:         c.cfg.Model,
		Stream:        true,
		StreamOptions: map[string]any{"include_usage": true},
	}
	if req.System != "" {
		body.Messages = append(body.Messages, message{Role: "system", Content: req.System})
	}
	for _, m := range req.Messages {
		body.Messages = append(body.Messages, message{Role: string(m.Role), Content: m.Text})
	}
	switch c.cfg.MaxTokensField {
	case FieldMaxCompletionTokens:
		body.MaxCompletionTokens = req.MaxOutputTokens
	case FieldMaxTokens:
		body.MaxTokens = req.MaxOutputTokens
	default:
		body.MaxCompletionTokens, body.MaxTokens = req.MaxOutputTokens, req.MaxOutputTokens
	}
	h := http.Header{}
	if c.cfg.APIKey != "" {
		h.Set("Authorization", "Bearer "+c.cfg.APIKey)
	}
	err := provider.Exchange(ctx, c.cfg.HTTPClient, c.cfg.Name, c.cfg.Model, c.cfg.BaseURL+"/chat/completions", h, body, func(resp *http.Response) error {
		res.RequestID = resp.Header.Get("X-Request-Id")
		if resp.StatusCode != http.StatusOK {
			return c.statusError(resp)
		}
		return c.read(ctx, resp.Body, &res, onText)
	})
	res.Elapsed = time.Since(start)
	return res, err
}

func (c *Client) fail(kind Kind, status int, e *apiError, reqID string) *provider.Error {
	pe := &provider.Error{Kind: kind, Provider: c.cfg.Name, Model: c.cfg.Model, Status: status, RequestID: reqID}
	if e != nil {
		pe.Code = provider.RedactCode(cmp.Or(e.code(), e.Type), c.cfg.APIKey)
		pe.Message = provider.Redact(e.Message, c.cfg.APIKey)
	}
	return pe
}

// Kind is provider.Kind, shortened for this file.
type Kind = provider.Kind

func (c *Client) statusError(resp *http.Response) error {
	raw := provider.ReadErrorBody(resp)
	var body struct {
		Error *apiError `json:"error"`
	}
	_ = json.Unmarshal(raw, &body) // a non-JSON body still has a status to classify
	e := body.Error
	kind := classify(resp.StatusCode, e)
	pe := c.fail(kind, resp.StatusCode, e, resp.Header.Get("X-Request-Id"))
	if e == nil {
		pe.Message = provider.Redact(strings.TrimSpace(string(raw)), c.cfg.APIKey)
	}
	if kind == provider.KindRateLimit || kind == provider.KindTransient {
		pe.RetryAfter = provider.RetryAfter(resp.Header, time.Now())
	}
	return pe
}

// classify refines the status class with OpenAI's error type and code.
func classify(status int, e *apiError) Kind {
	var code, typ, msg string
	if e != nil {
		code, typ, msg = e.code(), e.Type, strings.ToLower(e.Message)
	}
	switch {
	case code == "insufficient_quota" || typ == "insufficient_quota" || code == "credit_balance_exhausted":
		return provider.KindQuota
	case code == "model_not_found" || (status == http.StatusNotFound && strings.Contains(msg, "model")):
		return provider.KindModelNotFound
	case code == "content_filter" || code == "content_policy_violation":
		return provider.KindPolicy
	case code == "invalid_api_key" || typ == "authentication_error" || typ == "permission_error":
		return provider.KindAuth
	}
	if status == 0 { // a mid-stream error: the body has no HTTP status of its own
		if n, err := strconv.Atoi(code); err == nil && n >= 400 {
			return provider.KindForStatus(n)
		}
		switch typ {
		case "invalid_request_error":
			return provider.KindInvalidRequest
		case "rate_limit_error", "requests", "tokens":
			return provider.KindRateLimit
		}
		return provider.KindTransient
	}
	return provider.KindForStatus(status)
}

func (c *Client) read(ctx context.Context, body io.Reader, res *provider.Result, onText func(string)) error {
	r := sse.NewReader(body)
	// blocked is a content_filter finish: the outcome, once the usage
	// chunk that comes after it (the tokens are billed all the same) has
	// been read.
	var blocked *provider.Error
	for {
		ev, err := r.Next()
		if blocked != nil && (err != nil || strings.HasPrefix(ev.Data, "[DONE]")) {
			return blocked
		}
		if err != nil { // a clean close without [DONE] is still a cut stream
			return provider.ReadError(ctx, c.cfg.Name, c.cfg.Model, res.RequestID, err)
		}
		if strings.HasPrefix(ev.Data, "[DONE]") {
			if res.FinishReason == "" {
				return &provider.Error{Kind: provider.KindMalformed, Provider: c.cfg.Name, Model: c.cfg.Model, RequestID: res.RequestID, Message: "stream ended without a finish reason"}
			}
			return nil
		}
		var ch chunk
		if err := json.Unmarshal([]byte(ev.Data), &ch); err != nil || (blocked != nil && ch.Error != nil) {
			if blocked != nil {
				return blocked
			}
			return &provider.Error{Kind: provider.KindMalformed, Provider: c.cfg.Name, Model: c.cfg.Model, RequestID: res.RequestID, Message: "bad chunk JSON"}
		}
		if ch.Error != nil {
			return c.fail(classify(0, ch.Error), 0, ch.Error, res.RequestID)
		}
		if res.RequestID == "" {
			res.RequestID = ch.ID
		}
		if ch.Model != "" {
			res.Model = ch.Model
		}
		if ch.Usage != nil {
			res.InputTokens, res.OutputTokens = ch.Usage.PromptTokens, ch.Usage.CompletionTokens
		}
		if blocked != nil {
			continue // nothing after the block is said
		}
		for _, choice := range ch.Choices[:min(len(ch.Choices), 1)] {
			if d := choice.Delta.Refusal; d != nil && *d != "" {
				return &provider.Error{Kind: provider.KindPolicy, Provider: c.cfg.Name, Model: c.cfg.Model, RequestID: res.RequestID, Code: "refusal"}
			}
			if d := choice.Delta.Content; d != nil && *d != "" {
				onText(*d)
			}
			if fr := choice.FinishReason; fr != nil {
				switch *fr {
				case "stop":
					res.FinishReason = provider.FinishStop
				case "length":
					res.FinishReason = provider.FinishLength
				case "content_filter":
					blocked = &provider.Error{Kind: provider.KindPolicy, Provider: c.cfg.Name, Model: c.cfg.Model, RequestID: res.RequestID, Code: "content_filter"}
				default:
					res.FinishReason = provider.FinishOther
				}
			}
		}
	}
}
