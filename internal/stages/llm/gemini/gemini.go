// Package gemini is the voiced adapter for the Gemini API's
// streamGenerateContent?alt=sse, with plain net/http and no retries of
// its own (the chain in package llm owns retries and fallback).
//
// It handles CRLF framing, the missing end marker (the stream ends when
// the connection closes, so a stream without any finishReason is a cut,
// not a success), finishReason on every chunk or only the last one,
// SAFETY, RECITATION and other block reasons (including
// promptFeedback.blockReason), the invalid-key 400 (API_KEY_INVALID is an
// authentication failure, not a bad request) and the 429 wait given in
// the body as google.rpc.RetryInfo.retryDelay. The key travels in the
// x-goog-api-key header, never in the URL, so transport errors (which
// quote the URL) cannot leak it.
package gemini

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/voiced/voiced/internal/stages/llm/provider"
	"github.com/voiced/voiced/internal/stages/llm/sse"
)

// DefaultBaseURL is the Gemini API base, as its SDKs and
// GOOGLE_GEMINI_BASE_URL give it: without the API version.
const DefaultBaseURL = "https://generativelanguage.googleapis.com"

// APIVersion is the version added to a base URL that has none.
const APIVersion = "v1beta"

// Config configures the adapter. The zero value (plus APIKey) means the
// Gemini API with gemini-2.5-flash.
type Config struct {
	BaseURL    string // the part before "/v1beta/models/...", or before "/models/..." when it ends in a version (v1beta, v1); default DefaultBaseURL
	Model      string // default "gemini-2.5-flash"
	APIKey     string // sent as x-goog-api-key
	HTTPClient *http.Client
}

func (c Config) withDefaults() Config {
	c.BaseURL = provider.VersionedBase(cmp.Or(c.BaseURL, DefaultBaseURL), APIVersion)
	c.Model = cmp.Or(c.Model, "gemini-2.5-flash")
	if c.HTTPClient == nil {
		c.HTTPClient = http.DefaultClient
	}
	return c
}

// Client streams content from one model.
type Client struct {
	cfg Config
	// finishEvery is set once a stream of this model was seen to put a
	// finish reason on a chunk that more text followed: its finish
	// reasons do not mark the end of an answer, only the stream's close
	// does.
	finishEvery atomic.Bool
}

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
func (c *Client) Name() string { return "gemini" }

// Model implements provider.Provider.
func (c *Client) Model() string { return c.cfg.Model }

type part struct {
	Text    string `json:"text,omitempty"`
	Thought bool   `json:"thought,omitempty"`
}

type content struct {
	Role  string `json:"role,omitempty"`
	Parts []part `json:"parts"`
}

type request struct {
	SystemInstruction *content  `json:"systemInstruction,omitempty"`
	Contents          []content `json:"contents"`
	GenerationConfig  struct {
		MaxOutputTokens int             `json:"maxOutputTokens"`
		ThinkingConfig  *thinkingConfig `json:"thinkingConfig,omitempty"`
	} `json:"generationConfig"`
}

type thinkingConfig struct {
	ThinkingBudget *int   `json:"thinkingBudget,omitempty"`
	ThinkingLevel  string `json:"thinkingLevel,omitempty"`
}

// thinking returns the least thinking model allows, nil for a model that
// does not think. Gemini 2.5 and later think by default, and their
// thinking is drawn from maxOutputTokens: with a voice answer's cap of a
// few dozen tokens and a first-token deadline of a few hundred
// milliseconds, a thinking model answers empty (finishReason MAX_TOKENS)
// or late, and bills the thoughts anyway. 2.5 Flash and Flash-Lite turn
// it off with a budget of 0; 2.5 Pro cannot, and takes its minimum, 128;
// Gemini 3 takes a level instead (a request with both fields is refused):
// "minimal" for Flash and Flash-Lite, "low" for Pro, which has no
// "minimal". The -latest aliases are not recognised (which model they
// name changes): set a versioned model name to get this.
func thinking(model string) *thinkingConfig {
	m := strings.TrimPrefix(model, "models/")
	budget := func(n int) *thinkingConfig { return &thinkingConfig{ThinkingBudget: &n} }
	switch {
	case strings.HasPrefix(m, "gemini-2.5-flash"):
		return budget(0)
	case strings.HasPrefix(m, "gemini-2.5-pro"):
		return budget(128)
	case strings.HasPrefix(m, "gemini-3") && strings.Contains(m, "-flash"):
		return &thinkingConfig{ThinkingLevel: "minimal"}
	case strings.HasPrefix(m, "gemini-3"):
		return &thinkingConfig{ThinkingLevel: "low"}
	}
	return nil
}

type apiError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Status  string `json:"status"`
	Details []struct {
		Type       string `json:"@type"`
		Reason     string `json:"reason"`
		RetryDelay string `json:"retryDelay"`
		Violations []struct {
			QuotaID string `json:"quotaId"`
		} `json:"violations"`
	} `json:"details"`
}

type chunk struct {
	Error      *apiError `json:"error"`
	Candidates []struct {
		Content      content `json:"content"`
		FinishReason string  `json:"finishReason"`
	} `json:"candidates"`
	PromptFeedback *struct {
		BlockReason string `json:"blockReason"`
	} `json:"promptFeedback"`
	UsageMetadata *struct {
		PromptTokenCount     int `json:"promptTokenCount"`
		CandidatesTokenCount int `json:"candidatesTokenCount"`
		// ThoughtsTokenCount is the thinking of 2.5 models, billed as
		// output but not part of candidatesTokenCount.
		ThoughtsTokenCount int `json:"thoughtsTokenCount"`
	} `json:"usageMetadata"`
	ModelVersion string `json:"modelVersion"`
	ResponseID   string `json:"responseId"`
}

// Stream implements provider.Provider.
func (c *Client) Stream(ctx context.Context, req *provider.Request, onText func(string)) (provider.Result, error) {
	start := time.Now()
	res := provider.Result{Provider: c.Name(), Model: c.cfg.Model}
	var body request
	if req.System != "" {
		body.SystemInstruction = &content{Parts: []part{{Text: req.System}}}
	}
	for _, m := range req.Messages {
		role := "user"
		if m.Role == provider.RoleAssistant {
			role = "model"
		}
		body.Contents = append(body.Contents, content{Role: role, Parts: []part{{Text: m.Text}}})
	}
	body.GenerationConfig.MaxOutputTokens = req.MaxOutputTokens
	body.GenerationConfig.ThinkingConfig = thinking(c.cfg.Model)
	h := http.Header{}
	h.Set("X-Goog-Api-Key", c.cfg.APIKey)
	// The API names models "models/NAME"; a model configured that way
	// (as go-genai accepts it) must not be escaped into models/models%2F.
	u := c.cfg.BaseURL + "/models/" + url.PathEscape(strings.TrimPrefix(c.cfg.Model, "models/")) + ":streamGenerateContent?alt=sse"
	err := provider.Exchange(ctx, c.cfg.HTTPClient, c.Name(), c.cfg.Model, u, h, body, func(resp *http.Response) error {
		if resp.StatusCode != http.StatusOK {
			return c.statusError(resp)
		}
		return c.read(ctx, resp.Body, &res, onText)
	})
	res.Elapsed = time.Since(start)
	return res, err
}

func (c *Client) statusError(resp *http.Response) error {
	raw := provider.ReadErrorBody(resp)
	var body struct {
		Error *apiError `json:"error"`
	}
	if json.Unmarshal(raw, &body) != nil {
		// Some endpoints wrap the error in an array.
		var arr []struct {
			Error *apiError `json:"error"`
		}
		if json.Unmarshal(raw, &arr) == nil && len(arr) > 0 {
			body.Error = arr[0].Error
		}
	}
	pe := c.fail(resp.StatusCode, body.Error)
	if body.Error == nil {
		pe.Message = provider.Redact(strings.TrimSpace(string(raw)), c.cfg.APIKey)
	}
	if pe.Kind == provider.KindRateLimit || pe.Kind == provider.KindTransient {
		pe.RetryAfter = cmp.Or(retryDelay(body.Error), provider.RetryAfter(resp.Header, time.Now()))
	}
	return pe
}

func (c *Client) fail(status int, e *apiError) *provider.Error {
	pe := &provider.Error{Kind: classify(status, e), Provider: c.Name(), Model: c.cfg.Model, Status: status}
	if e != nil {
		pe.Code = provider.RedactCode(e.Status, c.cfg.APIKey)
		pe.Message = provider.Redact(e.Message, c.cfg.APIKey)
	}
	return pe
}

// classify refines the status with the RPC status and error details.
func classify(status int, e *apiError) provider.Kind {
	if e == nil {
		if status == 0 {
			return provider.KindTransient
		}
		return provider.KindForStatus(status)
	}
	if status == 0 {
		status = e.Code
	}
	for _, d := range e.Details {
		switch d.Reason {
		case "API_KEY_INVALID", "API_KEY_SERVICE_BLOCKED", "API_KEY_EXPIRED":
			return provider.KindAuth
		}
		for _, v := range d.Violations {
			if strings.Contains(v.QuotaID, "PerDay") {
				return provider.KindQuota // retrying within seconds cannot help
			}
		}
	}
	switch e.Status {
	case "UNAUTHENTICATED", "PERMISSION_DENIED":
		return provider.KindAuth
	case "RESOURCE_EXHAUSTED":
		return provider.KindRateLimit
	case "UNAVAILABLE", "INTERNAL", "DEADLINE_EXCEEDED":
		return provider.KindTransient
	case "FAILED_PRECONDITION":
		return provider.KindQuota // billing or region: waiting will not help
	case "NOT_FOUND":
		if strings.Contains(strings.ToLower(e.Message), "model") {
			return provider.KindModelNotFound
		}
	}
	if status == 0 {
		return provider.KindTransient
	}
	return provider.KindForStatus(status)
}

// retryDelay reads google.rpc.RetryInfo.retryDelay ("35s", "41.7s"), a
// protobuf duration in seconds, at most provider.MaxRetryAfter (like
// provider.RetryAfter: a wait too large for a Duration is that long too,
// not none).
func retryDelay(e *apiError) time.Duration {
	if e == nil {
		return 0
	}
	for _, d := range e.Details {
		if !strings.HasSuffix(d.Type, "google.rpc.RetryInfo") {
			continue
		}
		if s, ok := strings.CutSuffix(d.RetryDelay, "s"); ok {
			if v, err := strconv.ParseFloat(s, 64); err == nil && v > 0 {
				return time.Duration(min(v, provider.MaxRetryAfter.Seconds()) * float64(time.Second))
			}
		}
	}
	return 0
}

// blocked finish reasons: a safety or policy block, never retried.
var blocked = map[string]bool{
	"SAFETY": true, "RECITATION": true, "BLOCKLIST": true, "PROHIBITED_CONTENT": true, "SPII": true,
	"IMAGE_SAFETY": true, "IMAGE_PROHIBITED_CONTENT": true, "IMAGE_RECITATION": true, "LANGUAGE": true,
}

func (c *Client) read(ctx context.Context, body io.Reader, res *provider.Result, onText func(string)) error {
	r := sse.NewReader(body)
	r.Bare = true // a bare {"error":{...}} line is an error, as go-genai reads it
	for {
		ev, err := r.Next()
		if err != nil {
			// There is no end marker: a clean close after a finishReason is
			// the end; anything else is a cut stream.
			if errors.Is(err, io.EOF) && ctx.Err() == nil && res.FinishReason != "" {
				return nil
			}
			if c.finishEvery.Load() {
				// Its finish reason says nothing of the end: a stream
				// cut (a stall) is an unfinished answer.
				res.FinishReason = ""
			}
			return provider.ReadError(ctx, c.Name(), c.cfg.Model, res.RequestID, err)
		}
		var ch chunk
		if ev.Bare {
			// Only an error is taken from a line without "data:".
			if json.Unmarshal([]byte(ev.Data), &ch) != nil || ch.Error == nil {
				continue
			}
		} else if err := json.Unmarshal([]byte(ev.Data), &ch); err != nil {
			return &provider.Error{Kind: provider.KindMalformed, Provider: c.Name(), Model: c.cfg.Model, RequestID: res.RequestID, Message: "bad chunk JSON"}
		}
		if ch.Error != nil {
			pe := c.fail(0, ch.Error)
			pe.RequestID = res.RequestID
			pe.RetryAfter = retryDelay(ch.Error)
			return pe
		}
		res.RequestID = cmp.Or(res.RequestID, ch.ResponseID)
		res.Model = cmp.Or(ch.ModelVersion, res.Model)
		if u := ch.UsageMetadata; u != nil {
			res.InputTokens, res.OutputTokens = u.PromptTokenCount, u.CandidatesTokenCount+u.ThoughtsTokenCount
		}
		if pf := ch.PromptFeedback; pf != nil && pf.BlockReason != "" {
			return &provider.Error{Kind: provider.KindPolicy, Provider: c.Name(), Model: c.cfg.Model, RequestID: res.RequestID, Code: pf.BlockReason}
		}
		if len(ch.Candidates) == 0 {
			continue
		}
		cand := ch.Candidates[0]
		for _, p := range cand.Content.Parts {
			if p.Text != "" && !p.Thought {
				if res.FinishReason != "" {
					// Text after a finish reason: this model puts one on
					// every chunk.
					c.finishEvery.Store(true)
				}
				onText(p.Text)
			}
		}
		switch fr := cand.FinishReason; {
		case fr == "":
		case fr == "STOP":
			res.FinishReason = provider.FinishStop
		case fr == "MAX_TOKENS":
			res.FinishReason = provider.FinishLength
		case blocked[fr]:
			return &provider.Error{Kind: provider.KindPolicy, Provider: c.Name(), Model: c.cfg.Model, RequestID: res.RequestID, Code: fr}
		default:
			res.FinishReason = provider.FinishOther
		}
		// Keep reading to EOF: some models put finishReason on every chunk.
	}
}
