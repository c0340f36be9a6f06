package twilio

import "testing"

// TestTogglePort: the scheme's default port is added to a URL that names
// none and removed from one that names it, for names, IPv4 and IPv6
// literals alike, and nothing else of the URL changes; a URL whose port
// cannot be told (an IPv6 literal without brackets) is left as it is.
func TestTogglePort(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"ws://example.com/v1/twilio", "ws://example.com:80/v1/twilio"},
		{"ws://example.com:80/v1/twilio", "ws://example.com/v1/twilio"},
		{"http://example.com/v1/twilio", "http://example.com:80/v1/twilio"},
		{"http://example.com:80/v1/twilio", "http://example.com/v1/twilio"},
		{"wss://example.com/v1/twilio?a=b", "wss://example.com:443/v1/twilio?a=b"},
		{"wss://example.com:443/v1/twilio?a=b", "wss://example.com/v1/twilio?a=b"},
		{"https://example.com", "https://example.com:443"},
		{"https://example.com:443", "https://example.com"},
		{"wss://example.com:8443/v1/twilio", "wss://example.com:8443/v1/twilio"},
		{"wss://example.com:80/v1/twilio", "wss://example.com:80/v1/twilio"},
		{"ws://127.0.0.1/v1/twilio", "ws://127.0.0.1:80/v1/twilio"},
		{"ws://127.0.0.1:80/v1/twilio", "ws://127.0.0.1/v1/twilio"},

		// IPv6 literals: in brackets, with and without a port.
		{"ws://[::1]/v1/twilio", "ws://[::1]:80/v1/twilio"},
		{"ws://[::1]:80/v1/twilio", "ws://[::1]/v1/twilio"},
		{"wss://[2001:db8::1]/v1/twilio", "wss://[2001:db8::1]:443/v1/twilio"},
		{"wss://[2001:db8::1]:443/v1/twilio", "wss://[2001:db8::1]/v1/twilio"},
		{"wss://[2001:db8::1]:8443/v1/twilio", "wss://[2001:db8::1]:8443/v1/twilio"},
		{"ws://[::]/v1/twilio", "ws://[::]:80/v1/twilio"},
		{"ws://[::]:80/v1/twilio", "ws://[::]/v1/twilio"},
		{"https://[::ffff:10.0.0.1]", "https://[::ffff:10.0.0.1]:443"},

		// Without brackets: which colon starts a port cannot be told.
		{"ws://::/v1/twilio", "ws://::/v1/twilio"},
		{"ws://::1/v1/twilio", "ws://::1/v1/twilio"},
		{"ws://::1:80/v1/twilio", "ws://::1:80/v1/twilio"},
		{"wss://2001:db8::1/v1/twilio", "wss://2001:db8::1/v1/twilio"},
		{"wss://2001:db8::1:443/v1/twilio", "wss://2001:db8::1:443/v1/twilio"},

		// Left alone: an empty port, another scheme, user info, another
		// case, no host.
		{"wss://example.com:/v1/twilio", "wss://example.com:/v1/twilio"},
		{"ftp://example.com/x", "ftp://example.com/x"},
		{"https://user@example.com/x", "https://user@example.com/x"},
		{"WSS://Example.com/x", "WSS://Example.com/x"},
		{"/v1/twilio", "/v1/twilio"},
	} {
		if got := togglePort(tc.in); got != tc.want {
			t.Errorf("togglePort(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
