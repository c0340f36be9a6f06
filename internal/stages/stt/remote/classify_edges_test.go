package remote

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/pipeline"
)

// TestCreditBalanceExhaustedIsNotARateLimit: OpenAI's newer out-of-credit
// 429 carries code "credit_balance_exhausted" (provider-wire-formats.md
// 1.3; the LLM adapter already knows it). Waiting never helps, so it is
// ErrUnavailable ("quota"), not ErrRateLimited.
func TestCreditBalanceExhaustedIsNotARateLimit(t *testing.T) {
	_, e, _ := newFake(t, jsonBody(http.StatusTooManyRequests,
		`{"error":{"message":"Your credit balance is too low to access the API.","type":"invalid_request_error","param":null,"code":"credit_balance_exhausted"}}`))
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	_, err := transcribe(ctx, e, speech(), 16000)
	require.ErrorIs(t, err, pipeline.ErrUnavailable)
	require.NotErrorIs(t, err, pipeline.ErrRateLimited)
}

// TestTruncatedErrorBodyKeepsStatusClass: "the status decides, whatever
// the size of the body" -- and whatever happens to the body. A 429 or 503
// whose error page is cut short (a gateway resetting the connection) was
// reported as unavailable because the body's read error won over the
// status already received.
func TestTruncatedErrorBodyKeepsStatusClass(t *testing.T) {
	for _, tt := range []struct {
		status string
		want   error
		text   string
	}{
		{"429 Too Many Requests", pipeline.ErrRateLimited, "HTTP 429"},
		{"503 Service Unavailable", pipeline.ErrOverloaded, "HTTP 503"},
		// A transcript cut short is no transcript.
		{"200 OK", pipeline.ErrUnavailable, "reading response"},
	} {
		t.Run(tt.status, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				io.Copy(io.Discard, r.Body)
				conn, buf, err := w.(http.Hijacker).Hijack()
				if err != nil {
					return
				}
				defer conn.Close()
				writeTruncated(buf, tt.status)
			}))
			defer srv.Close()
			e, err := New(Config{BaseURL: srv.URL + "/v1"}, srv.Client(), quiet, nil)
			require.NoError(t, err)
			ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
			defer cancel()
			_, err = transcribe(ctx, e, speech(), 16000)
			require.ErrorIs(t, err, tt.want)
			require.ErrorContains(t, err, tt.text)
		})
	}
}

func writeTruncated(buf *bufio.ReadWriter, status string) {
	buf.WriteString("HTTP/1.1 " + status + "\r\nContent-Type: application/json\r\nContent-Length: 500\r\nConnection: close\r\n\r\n")
	buf.WriteString(`{"error":{"message":"slow do`)
	buf.Flush()
}

// TestBadRequestAboutConfigIsNotBadAudio: a 400 that names one of the
// server's own parameters (a model that cannot transcribe, a language
// not in ISO-639-1, -stt.remote.language=english) is the operator's
// misconfiguration, not the caller's audio: every request would be
// answered bad_audio, blaming the client.
func TestBadRequestAboutConfigIsNotBadAudio(t *testing.T) {
	for _, param := range []string{"language", "model", "response_format"} {
		t.Run(param, func(t *testing.T) {
			_, e, _ := newFake(t, jsonBody(http.StatusBadRequest,
				`{"error":{"message":"Invalid `+param+`.","type":"invalid_request_error","param":"`+param+`","code":"invalid_value"}}`))
			ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
			defer cancel()
			_, err := transcribe(ctx, e, speech(), 16000)
			require.ErrorIs(t, err, pipeline.ErrUnavailable)
			require.NotErrorIs(t, err, pipeline.ErrBadAudio)
		})
	}
}

// TestTransportErrorHidesURLCredentials: a gateway token put in the base
// URL as its user (https://TOKEN@host/v1) reached the error, which the
// session logs: net/http masks only a password, and the LLM adapters drop
// the URL from transport errors for that reason (provider.stripURL).
func TestTransportErrorHidesURLCredentials(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	ln.Close()
	const token = "gw-secret-token-4242"
	e, err := New(Config{BaseURL: "http://" + token + "@" + addr + "/v1"}, nil, quiet, nil)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	_, err = transcribe(ctx, e, speech(), 16000)
	require.ErrorIs(t, err, pipeline.ErrUnavailable)
	require.False(t, strings.Contains(err.Error(), token), "token in error: %v", err)
}
