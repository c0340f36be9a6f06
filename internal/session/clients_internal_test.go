package session

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
)

// TestClientKeyOfZonedAddress: a client that writes zones into
// X-Forwarded-For gains no place by them. Its address has none
// (ClientAddr), so its key is its /64's like any other address of it,
// and clientKey drops a zone all the same.
func TestClientKeyOfZonedAddress(t *testing.T) {
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	for _, tc := range []struct{ tenant, xff, want string }{
		{xff: "2001:db8:1:2::9", want: "addr:2001:db8:1:2::/64"},
		{xff: "2001:db8:1:2::9%eth0", want: "addr:2001:db8:1:2::/64"},
		{xff: "[2001:db8:1:2::a%x]:443", want: "addr:2001:db8:1:2::/64"},
		{xff: "fe80::1%eth0", want: "addr:fe80::/64"},
		{xff: "198.51.100.1", want: "addr:198.51.100.1"},
		{tenant: "0a1b", xff: "fe80::1%eth0", want: "tenant:0a1b"},
	} {
		r := httptest.NewRequest(http.MethodGet, "/v1/session", nil)
		r.RemoteAddr = "10.0.0.2:40000"
		r.Header.Set("X-Forwarded-For", tc.xff)
		if got := clientKey(tc.tenant, ClientAddr(r, trusted)); got != tc.want {
			t.Errorf("X-Forwarded-For %q, tenant %q: key %q, want %q", tc.xff, tc.tenant, got, tc.want)
		}
	}
	if got, want := clientKey("", "2001:db8:1:2::9%eth0"), "addr:2001:db8:1:2::/64"; got != want {
		t.Errorf("clientKey of a zoned address = %q, want %q", got, want)
	}
}
