// Package anthropic is the voiced adapter for the Anthropic Messages API,
// streaming, with plain net/http and no retries of its own (the chain in
// package llm owns retries and fallback).
//
// It handles the named event sequence (message_start, content_block_*,
// message_delta, message_stop, ping, unknown events ignored), error
// events that arrive mid-stream after a 200 (classified by their error
// type, not the HTTP status), stop reasons max_tokens and refusal, and
// streams cut before message_stop, which are failures, never a short
// success.
package anthropic

import (
	"cmp"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/voiced/voiced/internal/stages/llm/provider"
	"github.com/voiced/voiced/internal/stages/llm/sse"
)

// DefaultBaseURL is Anthropic's API base, as its SDKs and
// ANTHROPIC_BASE_URL give it: without the API version.
const DefaultBaseURL = "https://api.anthropic.com"

// Version is the anthropic-version header sent.
const Version = "2023-06-01"

// Config configures the adapter. The zero value (plus APIKey) means
// Anthropic's API with claude-haiku-4-5.
type Config struct {
	BaseURL    string // the part before "/v1/messages", or before "/messages" when it ends in /v1; default DefaultBaseURL
	Model      string // default "claude-haiku-4-5"
	APIKey     string // sent as x-api-key
	HTTPClient *http.Client
}

func (c Config) withDefaults() Config {
	c.BaseURL = provider.VersionedBase(cmp.Or(c.BaseURL, DefaultBaseURL), "v1")
	c.Model = cmp.Or(c.Model, "claude-haiku-4-5")
	if c.HTTPClient == nil {
		c.HTTPClient = http.DefaultClient
	}
	return c
}

// Client streams messages from one model.
type Client struct{ cfg Config }

var (
	_ provider.Provider = (*Client)(nil)
	_ provider.Warmer   = (*Client)(nil)
)

// New returns a client.
func New(cfg Config) *Client { return &Client{cfg: cfg.withDefaults()} }

// Warm implements provider.Warmer.
func (c *Client) Warm(ctx context.Context) error {
	return provider.Warm(ctx, c.cfg.HTTPClient, c.cfg.BaseURL+"/")
}

// BaseURL is the API base requests go to, with its version.
func (c *Client) BaseURL() string { return c.cfg.BaseURL }

// Name implements provider.Provider.
func (c *Client) Name() string { return "anthropic" }

// Model implements provider.Provider.
func (c *Client) Model() string { return c.cfg.Model }

type message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

type request struct {
	Model     string    `json:"model"`
	MaxTokens int       `json:"max_tokens"`
	System    string    `json:"system,omitempty"`
	Messages  []message `json:"messages"`
	Stream    bool      `json:"stream"`
}

type apiError struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

type event struct {
	Type    string    `json:"type"`
	Error   *apiError `json:"error"`
	Message *struct {
		ID    string `json:"id"`
		Model string `json:"model"`
		Usage struct {
			InputTokens  int `json:"input_tokens"`
			OutputTokens int `json:"output_tokens"`
		} `json:"usage"`
	} `json:"message"`
	Delta *struct {
		Type       string `json:"type"`
		Text       string `json:"text"`
		StopReason string `json:"stop_reason"`
	} `json:"delta"`
	// Usage of message_delta: cumulative counts. output_tokens is always
	// there; newer API versions repeat input_tokens as well.
	Usage *struct {
		InputTokens  *int `json:"input_tokens"`
		OutputTokens int  `json:"output_tokens"`
	} `json:"usage"`
}

// Stream implements provider.Provider.
func (c *Client) Stream(ctx context.Context, req *provider.Request, onText func(string)) (provider.Result, error) {
	start := time.Now()
	res := provider.Result{Provider: c.Name(), Model: c.cfg.Model}
	body := request{Model: c.cfg.Model, MaxTokens: req.MaxOutputTokens, System: req.System, Stream: true}
	for _, m := range req.Messages {
		body.Messages = append(body.Messages, message{Role: string(m.Role), Content: m.Text})
	}
	h := http.Header{}
	h.Set("X-Api-Key", c.cfg.APIKey)
	h.Set("Anthropic-Version", Version)
	err := provider.Exchange(ctx, c.cfg.HTTPClient, c.Name(), c.cfg.Model, c.cfg.BaseURL+"/messages", h, body, func(resp *http.Response) error {
		res.RequestID = resp.Header.Get("Request-Id")
		if resp.StatusCode != http.StatusOK {
			return c.statusError(resp)
		}
		return c.read(ctx, resp.Body, &res, onText)
	})
	res.Elapsed = time.Since(start)
	return res, err
}

func (c *Client) fail(kind provider.Kind, status int, e *apiError, reqID string) *provider.Error {
	pe := &provider.Error{Kind: kind, Provider: c.Name(), Model: c.cfg.Model, Status: status, RequestID: reqID}
	if e != nil {
		pe.Code = provider.RedactCode(e.Type, c.cfg.APIKey)
		pe.Message = provider.Redact(e.Message, c.cfg.APIKey)
	}
	return pe
}

func (c *Client) statusError(resp *http.Response) error {
	raw := provider.ReadErrorBody(resp)
	var body struct {
		Error     *apiError `json:"error"`
		RequestID string    `json:"request_id"`
	}
	_ = json.Unmarshal(raw, &body) // a non-JSON body (e.g. from a proxy) still has a status
	pe := c.fail(classify(resp.StatusCode, body.Error), resp.StatusCode, body.Error, cmp.Or(resp.Header.Get("Request-Id"), body.RequestID))
	if body.Error == nil {
		pe.Message = provider.Redact(strings.TrimSpace(string(raw)), c.cfg.APIKey)
	}
	if pe.Kind == provider.KindRateLimit || pe.Kind == provider.KindTransient {
		pe.RetryAfter = provider.RetryAfter(resp.Header, time.Now())
	}
	return pe
}

// classify maps a status (0 for a mid-stream error event) and error type
// to a kind; the type wins, because mid-stream errors come with a 200.
func classify(status int, e *apiError) provider.Kind {
	typ, msg := "", ""
	if e != nil {
		typ, msg = e.Type, strings.ToLower(e.Message)
	}
	switch typ {
	case "overloaded_error", "api_error", "timeout_error":
		return provider.KindTransient
	case "rate_limit_error":
		return provider.KindRateLimit
	case "billing_error":
		return provider.KindQuota
	case "authentication_error", "permission_error":
		return provider.KindAuth
	case "not_found_error":
		if strings.Contains(msg, "model") {
			return provider.KindModelNotFound
		}
		return provider.KindInvalidRequest
	case "invalid_request_error", "request_too_large":
		if strings.Contains(msg, "credit balance") {
			return provider.KindQuota
		}
		return provider.KindInvalidRequest
	}
	if status == 0 {
		return provider.KindTransient
	}
	return provider.KindForStatus(status)
}

func (c *Client) read(ctx context.Context, body io.Reader, res *provider.Result, onText func(string)) error {
	r := sse.NewReader(body)
	for {
		ev, err := r.Next()
		if err != nil { // before message_stop, even a clean close is a cut stream
			return provider.ReadError(ctx, c.Name(), c.cfg.Model, res.RequestID, err)
		}
		var e event
		if err := json.Unmarshal([]byte(ev.Data), &e); err != nil {
			return &provider.Error{Kind: provider.KindMalformed, Provider: c.Name(), Model: c.cfg.Model, RequestID: res.RequestID, Message: "bad event JSON"}
		}
		typ := cmp.Or(e.Type, ev.Name)
		switch typ {
		case "error":
			return c.fail(classify(0, e.Error), 0, e.Error, res.RequestID)
		case "message_start":
			if e.Message != nil {
				res.RequestID = cmp.Or(res.RequestID, e.Message.ID)
				res.Model = cmp.Or(e.Message.Model, res.Model)
				res.InputTokens = e.Message.Usage.InputTokens
				res.OutputTokens = e.Message.Usage.OutputTokens
			}
		case "content_block_delta":
			if e.Delta != nil && e.Delta.Type == "text_delta" && e.Delta.Text != "" {
				onText(e.Delta.Text)
			}
		case "message_delta":
			if e.Usage != nil {
				res.OutputTokens = e.Usage.OutputTokens // cumulative
				if e.Usage.InputTokens != nil {
					res.InputTokens = *e.Usage.InputTokens
				}
			}
			if e.Delta != nil {
				switch e.Delta.StopReason {
				case "":
				case "end_turn", "stop_sequence":
					res.FinishReason = provider.FinishStop
				case "max_tokens", "model_context_window_exceeded":
					res.FinishReason = provider.FinishLength
				case "refusal":
					return &provider.Error{Kind: provider.KindPolicy, Provider: c.Name(), Model: c.cfg.Model, RequestID: res.RequestID, Code: "refusal"}
				default:
					res.FinishReason = provider.FinishOther
				}
			}
		case "message_stop":
			if res.FinishReason == "" {
				return &provider.Error{Kind: provider.KindMalformed, Provider: c.Name(), Model: c.cfg.Model, RequestID: res.RequestID, Message: "message_stop without a stop reason"}
			}
			return nil
		}
		// ping, content_block_start/stop and unknown events are ignored.
	}
}
