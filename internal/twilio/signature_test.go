package twilio_test

import (
	"crypto/hmac"
	"crypto/sha1"
	"encoding/base64"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/twilio"
)

// hmacSHA1 is the signature computed here, independently of the code
// under test: base64(HMAC-SHA1(key, data)).
func hmacSHA1(key, data string) string {
	m := hmac.New(sha1.New, []byte(key))
	m.Write([]byte(data))
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// TestSignatureKnownVector: the example of Twilio's validators (twilio-go
// client/request_validator_test.go: auth token 12345, a URL with a
// query, five POST parameters), whose published signature is also what
// `openssl dgst -sha1 -hmac 12345 -binary | base64` gives for the URL
// followed by the parameters sorted by name.
func TestSignatureKnownVector(t *testing.T) {
	const (
		token = "12345"
		u     = "https://mycompany.com/myapp.php?foo=1&bar=2"
		want  = "RSOYDt4T1cUTdK1PDd93/VVr8B8="
	)
	params := url.Values{
		"Digits": {"1234"}, "CallSid": {"CA1234567890ABCDE"}, "To": {"+18005551212"},
		"Caller": {"+14158675309"}, "From": {"+14158675309"},
	}
	require.Equal(t, want, hmacSHA1(token, u+"CallSidCA1234567890ABCDECaller+14158675309Digits1234From+14158675309To+18005551212"))
	require.Equal(t, want, twilio.Signature(token, u, params))
}

// TestValidSignature: a handshake's signature is of the URL alone, byte
// for byte as Twilio requested it (its query unsorted and not
// re-encoded), with or without the scheme's default port.
func TestValidSignature(t *testing.T) {
	const token = "12345"
	const signed = "wss://voiced.example.ngrok.app/v1/twilio?b=2&a=x%20y"
	// Computed by openssl, as in TestSignatureKnownVector.
	const sig = "+sTfvT5HfbTtjtMrO5IPS8mNdNs="
	require.Equal(t, sig, hmacSHA1(token, signed))
	for _, tc := range []struct {
		name  string
		token string
		url   string
		sig   string
		want  bool
	}{
		{"as signed", token, signed, sig, true},
		{"default port named", token, "wss://voiced.example.ngrok.app:443/v1/twilio?b=2&a=x%20y", sig, true},
		{"other port", token, "wss://voiced.example.ngrok.app:8443/v1/twilio?b=2&a=x%20y", sig, false},
		{"query sorted", token, "wss://voiced.example.ngrok.app/v1/twilio?a=x%20y&b=2", sig, false},
		{"query re-encoded", token, "wss://voiced.example.ngrok.app/v1/twilio?b=2&a=x+y", sig, false},
		{"https for wss", token, "https://voiced.example.ngrok.app/v1/twilio?b=2&a=x%20y", sig, false},
		{"no query", token, "wss://voiced.example.ngrok.app/v1/twilio", sig, false},
		{"wrong token", "54321", signed, sig, false},
		{"no token", "", signed, sig, false},
		{"no signature", token, signed, "", false},
		{"not base64", token, signed, "not base64!", false},
		{"truncated", token, signed, sig[:20], false},
		// The last character's two low bits are not part of the 20 bytes:
		// decoded, it is the same signature, but not Twilio's.
		{"unused bits of the last character changed", token, signed, "+sTfvT5HfbTtjtMrO5IPS8mNdNt=", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, twilio.ValidSignature(tc.token, tc.url, tc.sig))
		})
	}
	// Signed with the port, validated without it.
	withPort := hmacSHA1(token, "ws://127.0.0.1:80/v1/twilio")
	require.True(t, twilio.ValidSignature(token, "ws://127.0.0.1/v1/twilio", withPort))
	require.True(t, twilio.ValidSignature(token, "ws://[::1]/v1/twilio", hmacSHA1(token, "ws://[::1]:80/v1/twilio")))
}
