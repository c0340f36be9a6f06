package remote

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestUnparsableBaseURLNotEchoedPerRequest: a -stt.remote.url that starts
// with http(s):// but does not parse (a port with a typo, a stray space or
// control character) was accepted at start, and then every utterance's
// error, logged at warning level as "request failed", quoted the whole
// URL: net/url's parse error carries it raw, user:password and ?key=
// included (http.Client masks the password only in its own errors).
func TestUnparsableBaseURLNotEchoedPerRequest(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, u := range []string{
		"http://user:sk-live-s3cret@stt.example:80a/v1",
		"https://stt.example/v1?key=sk-live-s3cret\x7f",
		"http://stt example/v1?key=sk-live-s3cret",
	} {
		e, err := New(Config{BaseURL: u}, nil, nil, nil)
		if err != nil {
			if strings.Contains(err.Error(), "s3cret") {
				t.Errorf("New(%q): the error quotes the URL: %v", u, err)
			}
			continue // refused at start, without the URL: fine
		}
		r, err := e.Start(ctx, 16000)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.Write(ctx, make([]int16, 160)); err != nil {
			t.Fatal(err)
		}
		_, err = r.Finish(ctx)
		if err == nil {
			t.Fatalf("%q: no error", u)
		}
		if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%q: the request's error quotes the URL: %v", u, err)
		}
	}
}
