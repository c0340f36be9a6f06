package session_test

import (
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/voiced/voiced/internal/session"
)

// FuzzClientAddr: -trusted-proxies and X-Forwarded-For are the two inputs
// of a client's address, the second written by whoever connects.
// ParseTrustedProxies gives masked prefixes, none of every address, that
// format and parse back to themselves. ClientAddr returns the peer as it
// is when it is not an address, else an address (no IPv4-mapped form, no
// zone): the peer's when the peer is not trusted, else the peer or a hop
// of the header; and an untrusted address it returns does not change
// whatever the client writes to the left of the header (the hops it
// controls).
func FuzzClientAddr(f *testing.F) {
	for _, s := range []struct{ trusted, peer, xff1, xff2 string }{
		{"10.0.0.0/8, 192.168.1.1, 2001:db8:ff::/48", "10.0.0.2:40000", "1.2.3.4, 5.6.7.8, 198.51.100.1", ""},
		{"10.0.0.0/8", "203.0.113.7:5000", "198.51.100.1", ""},
		{"10.0.0.0/8", "10.0.0.2:40000", "1.2.3.4", "198.51.100.1, 10.1.1.1"},
		{"10.0.0.0/8", "10.0.0.2:40000", "10.3.3.3, 10.4.4.4", ""},
		{"10.0.0.0/8", "10.0.0.2:40000", "198.51.100.1,, ,", ""},
		{"2001:db8:ff::/48", "[2001:db8:ff::2]:443", "[2001:db8:1::9]:5060", ""},
		{"::ffff:10.0.0.0/104", "[::ffff:10.0.0.2]:40000", "::ffff:198.51.100.1", ""},
		{"10.0.0.0/8", "10.0.0.2:40000", "198.51.100.1, garbage", ""},
		{"10.0.0.0/8", "10.0.0.2:40000", "<script>, 198.51.100.1", ""},
		{"fe80::/10", "[fe80::1%eth0]:443", "fe80::2%eth1, 2001:db8::1%x", ""},
		{"10.0.0.0/8", "10.0.0.2:40000", `fe80::1%" msg="forged`, ""},
		{"10.0.0.0/8", "@unix", "198.51.100.1", ""},
		{"0.0.0.0/0", "10.0.0.2:1", "1.1.1.1", ""},
		{"10.0.0.0/33, x", "", "", ""},
	} {
		f.Add(s.trusted, s.peer, s.xff1, s.xff2)
	}
	fallback := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("2001:db8::/32")}
	f.Fuzz(func(t *testing.T, list, peer, xff1, xff2 string) {
		trusted, err := session.ParseTrustedProxies(list)
		if err != nil {
			trusted = fallback // the address is still worth walking
		} else {
			var again []string
			for _, p := range trusted {
				if !p.IsValid() || p.Bits() == 0 || p != p.Masked() || p.Addr().Zone() != "" || p.Addr().Is4In6() && p.Bits() >= 96 {
					t.Fatalf("ParseTrustedProxies(%q): prefix %v", list, p)
				}
				again = append(again, p.String())
			}
			back, err := session.ParseTrustedProxies(strings.Join(again, ","))
			if err != nil || !slices.Equal(back, trusted) {
				t.Fatalf("ParseTrustedProxies(%q) = %v, formatted and parsed again %v, %v", list, trusted, back, err)
			}
		}
		trustedAddr := func(a netip.Addr) bool {
			for _, p := range trusted {
				if p.Contains(a.WithZone("")) {
					return true
				}
			}
			return false
		}
		addr := func(xff ...string) string {
			r := &http.Request{RemoteAddr: peer, Header: http.Header{}}
			for _, v := range xff {
				r.Header.Add("X-Forwarded-For", v)
			}
			return session.ClientAddr(r, trusted)
		}
		got := addr(xff1, xff2)
		p, peerOK := hop(peer)
		if !peerOK {
			if got != peer {
				t.Fatalf("peer %q is not an address, yet the client is %q", peer, got)
			}
			return
		}
		a, err := netip.ParseAddr(got)
		if err != nil || a.Is4In6() || a.Zone() != "" || a.String() != got {
			t.Fatalf("ClientAddr = %q: not an address in its usual form, without a zone (%v)", got, err)
		}
		if !trustedAddr(p) {
			if a != p {
				t.Fatalf("untrusted peer %q, but the client is %q (from its header)", peer, got)
			}
			return
		}
		if a != p && !hasHop(a, xff1, xff2) {
			t.Fatalf("trusted peer %q: client %q is neither the peer nor a hop of %q, %q", peer, got, xff1, xff2)
		}
		if trustedAddr(a) {
			return // every hop trusted: the leftmost, which the client may move
		}
		// Whatever the client wrote before the hops that reached the
		// trusted proxies.
		for _, spoof := range []string{"1.2.3.4", "10.0.0.1", "2001:db8::1, 203.0.113.9", "garbage", ""} {
			if again := addr(spoof, xff1, xff2); again != got {
				t.Fatalf("peer %q, X-Forwarded-For %q, %q: client %q; with %q written to the left: %q", peer, xff1, xff2, got, spoof, again)
			}
			if again := addr(spoof+","+xff1, xff2); again != got {
				t.Fatalf("peer %q, X-Forwarded-For %q, %q: client %q; with %q prepended: %q", peer, xff1, xff2, got, spoof, again)
			}
		}
	})
}

// hop parses s as the test reads an address of X-Forwarded-For or a
// RemoteAddr: with or without a port, IPv6 with or without brackets,
// IPv4-mapped as IPv4, without its zone.
func hop(s string) (netip.Addr, bool) {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap().WithZone(""), true
	}
	a, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(s, "["), "]"))
	return a.Unmap().WithZone(""), err == nil
}

// hasHop reports whether a is one of the hops of the X-Forwarded-For
// headers xff.
func hasHop(a netip.Addr, xff ...string) bool {
	for _, h := range xff {
		for e := range strings.SplitSeq(h, ",") {
			if b, ok := hop(strings.TrimSpace(e)); ok && b == a {
				return true
			}
		}
	}
	return false
}
