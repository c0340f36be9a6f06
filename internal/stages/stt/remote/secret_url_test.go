package remote

import (
	"strings"
	"testing"
)

// TestBadBaseURLNotEchoed: a -stt.remote.url refused at start is not
// quoted in the error (voiced prints it, and the journal keeps it): a URL
// can carry credentials, e.g. user:key@ with a scheme in capitals, which
// the check refuses. The TTS engine's twin already says only the setting.
func TestBadBaseURLNotEchoed(t *testing.T) {
	for _, u := range []string{
		"HTTPS://user:sk-live-s3cret@stt.example/v1",
		"htps://user:sk-live-s3cret@stt.example/v1",
		"stt.example/v1?key=sk-live-s3cret",
	} {
		_, err := New(Config{BaseURL: u}, nil, nil, nil)
		if err == nil {
			continue // accepted: nothing printed
		}
		if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("New(%q): the error quotes the URL: %v", u, err)
		}
	}
}
