package remote

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/stages/tts/speech"
)

// A redirect must not carry the API key anywhere the configured base URL
// does not point: not from https down to plain http (the key would cross
// the network in clear text), nor to another server. net/http keeps
// Authorization on any redirect to the same host name, whatever the
// scheme or port, and a 307 replays the request body too.
func TestRedirectKeepsKey(t *testing.T) {
	var mu sync.Mutex
	var leaked []string
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		leaked = append(leaked, r.Header.Get("Authorization"))
		mu.Unlock()
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(make([]byte, 4800))
	}))
	defer plain.Close()
	secure := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Same host name (127.0.0.1), other port, plain http.
		http.Redirect(w, r, plain.URL+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	defer secure.Close()

	t.Setenv("VOICED_TTS_TEST_KEY", secretKey)
	e, err := New(Config{BaseURL: secure.URL + "/v1", APIKeyEnv: "VOICED_TTS_TEST_KEY"}, secure.Client())
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	_, err = e.Synthesize(ctx, speech.Request{Text: "hello", SampleRate: 24000}, func([]int16) {})
	mu.Lock()
	for _, a := range leaked {
		require.False(t, strings.Contains(a, secretKey), "the API key was sent over plain http after a redirect")
	}
	mu.Unlock()
	require.Error(t, err, "a redirect off the base URL's scheme is a misconfiguration, not audio")
	require.NotContains(t, err.Error(), secretKey)
}
