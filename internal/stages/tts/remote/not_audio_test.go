package remote

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/stages/llm/provider"
	"github.com/voiced/voiced/internal/stages/tts/speech"
)

// TestOKThatIsNotAudio: a 200 whose body is a JSON error or a web page (a
// gateway that reports errors with a 200, a base URL that points at a web
// app) is not audio. Its bytes used to be played to the caller as PCM,
// noise; it is a malformed response, with no audio emitted, so the
// fallback engine speaks the sentence.
func TestOKThatIsNotAudio(t *testing.T) {
	for _, tt := range []struct {
		name, contentType, body, msg string
	}{
		{"json error", "application/json", `{"error":{"message":"Voice alloy not found","type":"invalid_request_error","code":null}}`, "Voice alloy not found"},
		{"json error with charset", "application/json; charset=utf-8", `{"detail":"model not loaded"}`, "model not loaded"},
		{"web page", "text/html; charset=utf-8", "<!doctype html><html><body>Sign in</body></html>", "<!doctype html>"},
		{"plain text", "text/plain", "upstream connect error", "upstream connect error"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", tt.contentType)
				_, _ = io.WriteString(w, tt.body)
			}))
			defer srv.Close()
			t.Setenv("VOICED_TTS_TEST_KEY", secretKey)
			e, err := New(Config{BaseURL: srv.URL + "/v1", APIKeyEnv: "VOICED_TTS_TEST_KEY"}, srv.Client())
			require.NoError(t, err)
			ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
			defer cancel()
			got, _, err := collect(ctx, e, speech.Request{Text: "Your order shipped.", SampleRate: 24000})
			require.Empty(t, got, "no noise")
			pe, ok := errors.AsType[*provider.Error](err)
			require.True(t, ok, "a *provider.Error, got %v", err)
			require.Equal(t, provider.KindMalformed, pe.Kind)
			require.Equal(t, http.StatusOK, pe.Status)
			require.Contains(t, pe.Message, tt.msg)
		})
	}
}
