package twilio

import (
	"crypto/hmac"
	"crypto/sha1"
	"encoding/base64"
	"maps"
	"net"
	"net/url"
	"slices"
	"strings"
)

// SignatureHeader is the header Twilio signs each of its requests with,
// the Media Streams WebSocket handshake among them (Twilio sends it in
// lower case there; header names are case-insensitive).
const SignatureHeader = "X-Twilio-Signature"

// Signature is Twilio's signature of a request to rawURL with the POST
// parameters params (none for a GET, as a Media Streams handshake is):
// base64 of the HMAC-SHA1, keyed with the account's auth token, of the
// URL exactly as Twilio requested it (scheme, host, path and query as
// written in the TwiML, not re-encoded) followed by each parameter's
// name and value, by name in byte order.
func Signature(authToken, rawURL string, params url.Values) string {
	mac := hmac.New(sha1.New, []byte(authToken))
	mac.Write([]byte(rawURL))
	for _, k := range slices.Sorted(maps.Keys(params)) {
		for _, v := range params[k] {
			mac.Write([]byte(k + v))
		}
	}
	return base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

// ValidSignature reports, in constant time, whether sig is Twilio's
// signature of a GET of rawURL (the Media Streams handshake). The URL is
// also tried with its scheme's default port added, or removed when it has
// it, as Twilio's own validators do: the TwiML may name the port or not.
func ValidSignature(authToken, rawURL, sig string) bool {
	if authToken == "" {
		return false
	}
	ok := false
	for _, u := range []string{rawURL, togglePort(rawURL)} {
		// The base64 text is compared, as Twilio's validators do, not
		// the bytes it decodes to: the decoder ignores the last
		// character's unused bits, so other text decodes the same.
		// Both tried whatever the first gives: the time taken tells
		// nothing of which matched.
		ok = hmac.Equal([]byte(sig), []byte(Signature(authToken, u, nil))) || ok
	}
	return ok
}

// togglePort returns rawURL with its scheme's default port (443 for wss
// and https, 80 for ws and http) added when it names no port, or removed
// when it names that one; rawURL as it is otherwise. Only the host is
// rewritten: the rest must stay byte for byte as signed.
func togglePort(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil || u.User != nil || u.Host == "" {
		return rawURL
	}
	port, ok := defaultPorts[u.Scheme]
	if !ok {
		return rawURL
	}
	prefix := u.Scheme + "://" + u.Host
	rest, found := strings.CutPrefix(rawURL, prefix)
	if !found {
		return rawURL // a scheme or host in another case, or escaped: left alone
	}
	return u.Scheme + "://" + toggleHostPort(u.Host, port) + rest
}

// defaultPorts are the default ports of the schemes Twilio signs.
var defaultPorts = map[string]string{"ws": "80", "http": "80", "wss": "443", "https": "443"}

// toggleHostPort returns host, a URL's host as written ("example.com",
// "[2001:db8::1]:443"), with port appended when it names none, or removed
// when it names that one; host as it is otherwise. Its own text is kept:
// an IPv6 literal keeps its brackets. A host that would not read back as
// itself with the port appended is left alone: an IPv6 literal without
// brackets ("::1"), whose last colon may or may not start a port
// (url.URL.Port takes "::1" for the host ":" on port 1).
func toggleHostPort(host, port string) string {
	if _, p, err := net.SplitHostPort(host); err == nil {
		if p == port {
			return strings.TrimSuffix(host, ":"+port)
		}
		return host // another port, or an empty one ("example.com:")
	}
	with := host + ":" + port
	if h, _, err := net.SplitHostPort(with); err == nil && (h == host || "["+h+"]" == host) {
		return with
	}
	return host
}
