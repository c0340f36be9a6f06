package remote

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/pipeline"
)

// TestKeyEchoedByServerIsRedacted: some OpenAI-compatible servers and
// gateways echo the credential they refused. The upstream message goes
// into the error, which the session logs ("request failed", err): the key
// must be taken out of it, as the LLM and TTS adapters do
// (provider.Redact), before the message is cut to 200 bytes (else a cut
// through the key leaves its prefix).
func TestKeyEchoedByServerIsRedacted(t *testing.T) {
	for _, body := range []string{
		`{"error":{"message":"Incorrect API key provided: ` + testKey + `.","type":"invalid_request_error","code":"invalid_api_key"}}`,
		`{"error":"invalid token Bearer ` + testKey + `"}`,
		`<html>401: Authorization: Bearer ` + testKey + ` rejected</html>`,
		`{"error":"` + strings.Repeat("x", 180) + ` key ` + testKey + `"}`,
	} {
		t.Run(body[:20], func(t *testing.T) {
			_, e, _ := newFake(t, jsonBody(http.StatusUnauthorized, body))
			ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
			defer cancel()
			_, err := transcribe(ctx, e, speech(), 16000)
			require.ErrorIs(t, err, pipeline.ErrUnavailable)
			require.NotContains(t, err.Error(), testKey)
			require.NotContains(t, err.Error(), testKey[:12], "no prefix of the key either")
		})
	}
}

// TestErrorClassWithLargeBody: an error response's class comes from its
// status, whatever the size of its body. A 429 or 503 whose body (a
// gateway's HTML page) is larger than MaxResponse was reported as a
// malformed response (unavailable) instead of rate limited / overloaded.
func TestErrorClassWithLargeBody(t *testing.T) {
	for _, tt := range []struct {
		status int
		want   error
	}{
		{http.StatusTooManyRequests, pipeline.ErrRateLimited},
		{http.StatusServiceUnavailable, pipeline.ErrOverloaded},
		{http.StatusRequestEntityTooLarge, pipeline.ErrBadAudio},
	} {
		t.Run(http.StatusText(tt.status), func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/html")
				w.WriteHeader(tt.status)
				w.Write([]byte("<html>" + strings.Repeat("busy ", 1000) + "</html>"))
			}))
			defer srv.Close()
			e, err := New(Config{BaseURL: srv.URL + "/v1", MaxResponse: 1024}, srv.Client(), quiet, nil)
			require.NoError(t, err)
			ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
			defer cancel()
			_, err = transcribe(ctx, e, speech(), 16000)
			require.ErrorIs(t, err, tt.want)
			require.Less(t, len(err.Error()), 600, "the message stays short")
		})
	}
}

// TestRedirectKeepsKey: net/http keeps Authorization on a redirect to
// the same host name whatever its scheme, so a 307 from https down to
// http would send the key, and the caller's audio, in the clear. The
// redirect is not followed: it is a wrong base URL.
func TestRedirectKeepsKey(t *testing.T) {
	var mu sync.Mutex
	var leaked []string
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		leaked = append(leaked, r.Header.Get("Authorization"))
		mu.Unlock()
		w.Write([]byte(`{"text":"hello"}`))
	}))
	defer plain.Close()
	secure := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, plain.URL+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	defer secure.Close()
	t.Setenv("TEST_STT_KEY", testKey)
	e, err := New(Config{BaseURL: secure.URL + "/v1", APIKeyEnv: "TEST_STT_KEY"}, secure.Client(), quiet, nil)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	_, err = transcribe(ctx, e, speech(), 16000)
	require.Error(t, err, "a redirect down to http is a misconfiguration")
	require.NotContains(t, err.Error(), testKey)
	mu.Lock()
	defer mu.Unlock()
	require.Empty(t, leaked, "the plain-http server got the request")
}

// A long message is cut at a character, never in half of one.
func TestErrorDetailCutsAtACharacter(t *testing.T) {
	msg, _ := errorDetail([]byte(`{"error":{"message":"x`+strings.Repeat("é", 300)+`"}}`), "")
	require.True(t, utf8.ValidString(msg), "%q", msg)
	require.True(t, strings.HasSuffix(msg, "..."))
}
