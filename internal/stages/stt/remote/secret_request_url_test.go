package remote

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/voiced/voiced/internal/pipeline"
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

// TestBaseURLUnparsableWithPathNotEchoed: New refuses a base URL that does
// not parse, but the request's URL is the base URL with the endpoint's
// path added; should that not parse, the error still leaves the URL out.
func TestBaseURLUnparsableWithPathNotEchoed(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	e, err := New(Config{BaseURL: "http://stt.example/v1"}, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	e.cfg.BaseURL = "http://stt example/v1?key=sk-live-s3cret" // past New's check
	r, err := e.Start(ctx, 16000)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Write(ctx, make([]int16, 160)); err != nil {
		t.Fatal(err)
	}
	_, err = r.Finish(ctx)
	if !errors.Is(err, pipeline.ErrUnavailable) || !strings.Contains(err.Error(), "bad base URL") {
		t.Fatalf("got %v, want a bad base URL, unavailable", err)
	}
	if strings.Contains(err.Error(), "s3cret") {
		t.Errorf("the request's error quotes the URL: %v", err)
	}
}
