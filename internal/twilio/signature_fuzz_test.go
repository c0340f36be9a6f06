package twilio

import (
	"net"
	"net/url"
	"strings"
	"testing"
)

// FuzzSignature: a Media Streams handshake's URL (its path and query, and
// without -twilio.public-url its host) and its X-Twilio-Signature are the
// caller's to send. Twilio's signature of a URL is valid for it and for
// the URL with the default port toggled, and for no other auth token;
// every one-byte change to the signature is refused, as is any other
// signature sent; and togglePort rewrites only the host's port, leaving
// the rest byte for byte.
func FuzzSignature(f *testing.F) {
	for _, s := range []struct{ token, url, sig string }{
		{"12345", "wss://voiced.example.ngrok.app/v1/twilio?b=2&a=x%20y", "+sTfvT5HfbTtjtMrO5IPS8mNdNs="},
		{"12345", "wss://voiced.example.ngrok.app:443/v1/twilio?b=2&a=x%20y", ""},
		{"tok", "ws://127.0.0.1:80/v1/twilio", "not base64!"},
		{"tok", "ws://[::1]/v1/twilio", "AAAAAAAAAAAAAAAAAAAAAAAAAAA="},
		{"tok", "ws://::/v1/twilio", "AAAAAAAAAAAAAAAAAAAAAAAAAAA="},
		{"tok", "wss://2001:db8::1:443/v1/twilio", ""},
		{"0", "ws://]", "0"},
		{"tok", "https://user@host/x", "+sTfvT5HfbTtjtMrO5IPS8mNdNs"},
		{"tok", "WSS://Host/x", "+sTfvT5HfbTtjtMrO5IPS8mNdNs=\n"},
		{"tok", "wss://host:/x", "===="},
		{"", "wss://host:8443", "x"},
	} {
		f.Add(s.token, s.url, s.sig, uint8(0), byte('A'))
	}
	f.Fuzz(func(t *testing.T, token, rawURL, sig string, at uint8, b byte) {
		toggled := togglePort(rawURL)
		checkToggled(t, rawURL, toggled)

		want := Signature(token, rawURL, nil)
		valid := func(u, sig string) bool { return ValidSignature(token, u, sig) }
		if token == "" {
			if valid(rawURL, want) || valid(rawURL, sig) {
				t.Fatal("a signature valid without an auth token")
			}
			return
		}
		if !valid(rawURL, want) {
			t.Fatalf("Twilio's signature of %q refused", rawURL)
		}
		if togglePort(toggled) == rawURL && !valid(toggled, want) {
			t.Fatalf("Twilio's signature of %q refused for %q", rawURL, toggled)
		}
		if ValidSignature(token+"x", rawURL, want) {
			t.Fatalf("the signature of %q valid for another auth token", rawURL)
		}
		if sig != want && sig != Signature(token, toggled, nil) && valid(rawURL, sig) {
			t.Fatalf("%q accepted for %q: Twilio's is %q", sig, rawURL, want)
		}
		i := int(at) % len(want)
		if b == want[i] {
			b ^= 1
		}
		if changed := want[:i] + string(b) + want[i+1:]; valid(rawURL, changed) {
			t.Fatalf("Twilio's signature %q with one byte changed, %q, accepted for %q", want, changed, rawURL)
		}
	})
}

// checkToggled fails unless toggled, togglePort's rawURL, is rawURL or
// rawURL with only its host rewritten: the scheme's default port added
// or removed.
func checkToggled(t *testing.T, rawURL, toggled string) {
	t.Helper()
	if toggled == rawURL {
		return
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatalf("togglePort(%q) = %q: rewrote a URL that does not parse", rawURL, toggled)
	}
	prefix := u.Scheme + "://"
	rest, ok := strings.CutPrefix(rawURL, prefix+u.Host)
	if !ok || !strings.HasPrefix(toggled, prefix) || !strings.HasSuffix(toggled, rest) {
		t.Fatalf("togglePort(%q) = %q: more than the host rewritten", rawURL, toggled)
	}
	port := map[string]string{"ws": "80", "http": "80", "wss": "443", "https": "443"}[u.Scheme]
	host := strings.TrimSuffix(strings.TrimPrefix(toggled, prefix), rest)
	without, with := u.Host, host
	if len(with) < len(without) {
		without, with = with, without
	}
	// The same host, as written, once with the port and once without: an
	// IPv6 literal keeps its brackets ("[::1]:80"), and one without them
	// ("::1") has no port that could be told apart.
	h, p, err := net.SplitHostPort(with)
	if port == "" || with != without+":"+port || err != nil || p != port || without != h && without != "["+h+"]" {
		t.Fatalf("togglePort(%q) = %q: host %q, want %q with the default port added or removed", rawURL, toggled, host, u.Host)
	}
}
