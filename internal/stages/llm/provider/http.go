package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/voiced/voiced/internal/stages/llm/sse"
)

// maxErrorBody bounds how much of an error response is read.
const maxErrorBody = 64 << 10

// Post sends body as JSON to url with the given headers. A transport
// failure comes back as an *Error (KindTransient, or KindCanceled when
// ctx is done); HTTP error statuses are left to the caller, which knows
// the provider's error format. The caller closes the response body.
func Post(ctx context.Context, client *http.Client, name, model, url string, header http.Header, body any) (*http.Response, error) {
	buf, err := json.Marshal(body)
	if err != nil {
		return nil, &Error{Kind: KindInvalidRequest, Provider: name, Model: model, Err: fmt.Errorf("encode request: %w", err)}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(buf))
	if err != nil {
		// The URL comes from configuration; never echo it (it could hold a key).
		return nil, &Error{Kind: KindInvalidRequest, Provider: name, Model: model, Message: "bad base URL"}
	}
	for k, v := range header {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	resp, err := SameHostRedirects(client).Do(req)
	if err != nil {
		kind, cause := ContextError(ctx, err)
		return nil, &Error{Kind: kind, Provider: name, Model: model, Err: stripURL(cause)}
	}
	return resp, nil
}

// SameHostRedirects returns a copy of client that follows a redirect only on
// the same host and never from https to http (an http:// base URL that a
// gateway upgrades to https keeps working); any other redirect comes back
// as the response, which KindForStatus takes for a wrong base URL.
// Following it would send the request on to wherever it points: net/http
// drops only Authorization on a move to another host, so Anthropic's
// x-api-key and Gemini's x-goog-api-key would go with it, and a 307 or 308
// replays the conversation too. The remote speech engines, which do not
// send through Post, use it as well.
func SameHostRedirects(client *http.Client) *http.Client {
	c := *client
	c.CheckRedirect = sameHostOnly
	return &c
}

// maxRedirects is net/http's own limit.
const maxRedirects = 10

func sameHostOnly(req *http.Request, via []*http.Request) error {
	first, prev := via[0].URL, via[len(via)-1].URL
	if len(via) >= maxRedirects || !strings.EqualFold(req.URL.Hostname(), first.Hostname()) ||
		(prev.Scheme == "https" && req.URL.Scheme != "https") {
		return http.ErrUseLastResponse
	}
	return nil
}

// Exchange posts body like Post and hands the response to handle, which
// sees its status, headers and body; the body is closed when handle
// returns. After a complete answer (handle returns nil at the stream's
// end marker) what is left of the body is read first, briefly: net/http
// keeps an HTTP/1.1 connection for the next request only once its body
// has been read to the end.
func Exchange(ctx context.Context, client *http.Client, name, model, url string, header http.Header, body any, handle func(*http.Response) error) error {
	resp, err := Post(ctx, client, name, model, url, header, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	err = handle(resp)
	if err == nil {
		drain(resp.Body)
	}
	return err
}

// Bounds on reading the rest of a body after the end marker: the end of
// the HTTP response follows the marker at once; a server that keeps the
// stream open does not hold the answer longer than drainWait.
const (
	drainBytes = 4 << 10
	drainWait  = 50 * time.Millisecond
)

// drain reads what is left of body, at most drainBytes and drainWait (the
// body is closed then, which ends the read).
func drain(body io.ReadCloser) {
	t := time.AfterFunc(drainWait, func() { _ = body.Close() })
	defer t.Stop()
	_, _ = io.CopyN(io.Discard, body, drainBytes)
}

// ReadErrorBody reads at most 64 KiB of an error response.
func ReadErrorBody(resp *http.Response) []byte {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	return b
}

// stripURL drops the URL from a *url.Error: the operation and the cause
// are enough, and a URL may carry credentials.
func stripURL(err error) error {
	type unwrapper interface{ Unwrap() error }
	if u, ok := err.(interface {
		Timeout() bool
		unwrapper
	}); ok {
		if inner := u.Unwrap(); inner != nil {
			return inner
		}
	}
	return err
}

// StreamError classifies an error met while reading a response body:
// ours when ctx is done, else a transient cut of the stream.
func StreamError(ctx context.Context, name, model string, err error) *Error {
	kind, cause := ContextError(ctx, err)
	return &Error{Kind: kind, Provider: name, Model: model, Err: cause}
}

// ReadError classifies an error from the SSE reader of a stream that had
// not reached its end: an over-long line is malformed; a clean close is a
// cut stream (transient) unless ctx is done, then it is ours.
func ReadError(ctx context.Context, name, model, requestID string, err error) *Error {
	if errors.Is(err, sse.ErrLineTooLong) {
		return &Error{Kind: KindMalformed, Provider: name, Model: model, RequestID: requestID, Err: err}
	}
	if errors.Is(err, io.EOF) && ctx.Err() == nil {
		err = io.ErrUnexpectedEOF
	}
	pe := StreamError(ctx, name, model, err)
	pe.RequestID = requestID
	return pe
}

// Warm opens a connection to baseURL (DNS, TCP and TLS) with a GET that
// carries no credentials, and drains the answer so the connection stays
// in the client's pool for the first real request. Any HTTP status
// counts as warm: only transport errors are returned.
func Warm(ctx context.Context, client *http.Client, baseURL string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, baseURL, nil)
	if err != nil {
		return errors.New("warm: bad base URL")
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("warm: %w", stripURL(err))
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxErrorBody))
	return resp.Body.Close()
}
