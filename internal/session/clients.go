package session

import (
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"strings"
)

// Fairness between clients. A client is a tenant (the identity of an
// access token) on a server with tokens, or an address on one without;
// each may hold at most Config.MaxSessionsPerClient sessions on this
// instance at once. The address is the peer's, or, when the peer is a
// trusted proxy (Config.TrustedProxies), the one its X-Forwarded-For
// names (ClientAddr).

// clientLimitRetryAfter is the Retry-After, in seconds, of a session
// refused for its client's limit: a slot frees only when one of that
// client's own sessions ends, so retrying every second only adds upgrades.
const clientLimitRetryAfter = "5"

// twilioAccount is the tenant of the phone calls Twilio signed
// (Config.TwilioAuthToken): the Twilio account is their client, however
// many numbers and callers it has. Not hex, unlike a token's tenant.
const twilioAccount = "twilio"

// ParseTrustedProxies parses a comma-separated list of CIDR prefixes
// (10.0.0.0/8, 2001:db8::/32) or addresses (a single host): the peers
// whose X-Forwarded-For is believed (Config.TrustedProxies). Empty
// entries are skipped; an IPv4-mapped IPv6 prefix is taken as IPv4. A
// prefix of every address (0.0.0.0/0, ::/0) is refused.
func ParseTrustedProxies(list string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for e := range strings.SplitSeq(list, ",") {
		if e = strings.TrimSpace(e); e == "" {
			continue
		}
		var p netip.Prefix
		if strings.Contains(e, "/") {
			var err error
			if p, err = netip.ParsePrefix(e); err != nil {
				return nil, fmt.Errorf("%q: not a CIDR prefix (want 10.0.0.0/8 or 2001:db8::/32)", e)
			}
		} else {
			a, err := netip.ParseAddr(e)
			if err != nil || a.Zone() != "" {
				return nil, fmt.Errorf("%q: not an address or CIDR prefix", e)
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		if a := p.Addr(); a.Is4In6() && p.Bits() >= 96 {
			p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
		}
		if p.Bits() == 0 {
			// Every peer a proxy: each client would name its own address
			// in X-Forwarded-For, and hold as many places as it names.
			return nil, fmt.Errorf("%q: trusts every peer, so any client could write its own address (name the proxies' addresses)", e)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// ClientAddr returns the address of the client that sent r: the peer's
// (r.RemoteAddr), unless the peer is one of trusted. Then X-Forwarded-For
// (every such header, in order, as one comma-separated list) is walked
// from the right, the hop nearest this server, skipping the trusted
// proxies' addresses: the first hop not trusted is the client, since no
// trusted proxy would have put it there unless it connected to it. The
// hops to its left, which the client may have written itself, are never
// read. When every hop is trusted, the leftmost is the client; a hop that
// is not an address ends the walk at the trusted hop that reported it.
// The address has no IPv6 zone. An invalid peer (a request made in a
// test, a Unix socket) is returned as it is.
func ClientAddr(r *http.Request, trusted []netip.Prefix) string {
	peer, ok := parseHop(r.RemoteAddr)
	if !ok {
		return r.RemoteAddr
	}
	if !isTrusted(peer, trusted) {
		return peer.String()
	}
	client := peer
	hops := r.Header.Values("X-Forwarded-For")
	for i := len(hops) - 1; i >= 0; i-- {
		list := hops[i]
		for list != "" {
			var hop string
			if j := strings.LastIndexByte(list, ','); j >= 0 {
				list, hop = list[:j], list[j+1:]
			} else {
				list, hop = "", list
			}
			if hop = strings.TrimSpace(hop); hop == "" {
				continue // an empty element ("a,,b"), as lists allow
			}
			a, ok := parseHop(hop)
			if !ok {
				return client.String()
			}
			client = a
			if !isTrusted(a, trusted) {
				return a.String()
			}
		}
	}
	return client.String()
}

// parseHop parses one address of X-Forwarded-For or a RemoteAddr: an
// address, with or without a port, IPv6 in brackets when it has one
// ("[2001:db8::1]:443"). An IPv4-mapped IPv6 address is its IPv4 address.
// An IPv6 zone ("fe80::1%eth0") is dropped: it names an interface of
// whichever host wrote it, nothing of the client's, and in a header it is
// text of the client's choosing that would reach the logs.
func parseHop(s string) (netip.Addr, bool) {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap().WithZone(""), true
	}
	s = strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, false
	}
	return a.Unmap().WithZone(""), true
}

// isTrusted reports whether a, without a zone (parseHop), is in one of
// the trusted prefixes.
func isTrusted(a netip.Addr, trusted []netip.Prefix) bool {
	for _, p := range trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// clientAddr is the address of the client that sent r (ClientAddr with
// the configured proxies): the one refusals are logged with.
func (s *Server) clientAddr(r *http.Request) string {
	return ClientAddr(r, s.cfg.TrustedProxies)
}

// clientKey is the client a session counts against: its tenant (a
// token's, or the Twilio account), else its address: for IPv6, its /64,
// which one host or home network is given whole (RFC 6177), so that
// naming another address of it gains no place.
func clientKey(tenant, addr string) string {
	if tenant != "" {
		return "tenant:" + tenant
	}
	if a, err := netip.ParseAddr(addr); err == nil && a.Is6() && !a.Is4In6() {
		return "addr:" + netip.PrefixFrom(a.WithZone(""), 64).Masked().String()
	}
	return "addr:" + addr
}

// claimClientLocked counts sess against client unless the client holds
// MaxSessionsPerClient sessions already; s.mu is held. It reports whether
// sess was admitted. A resume that supersedes a session of the same
// client's still open here (a half-open connection) is admitted one over
// the limit: it ends that one, which frees its place. One over, not more:
// the session it ends keeps its place until its requests in flight end
// (their deadline), and a client resuming again meanwhile would stack
// such sessions past its limit.
func (s *Server) claimClientLocked(sess *Session, client, resumes string) bool {
	if client == "" || s.cfg.MaxSessionsPerClient <= 0 {
		return true
	}
	n, limit := s.perClient[client], s.cfg.MaxSessionsPerClient
	if n > limit || n == limit && !s.supersedesOwnLocked(client, resumes) {
		return false
	}
	s.perClient[client] = n + 1
	sess.client = client
	return true
}

// supersedesOwnLocked reports whether a resume of conv ends a session of
// client's that is open here; s.mu is held. Not only the live one: every
// session of the conversation here is ended by a newer one (takeOver,
// attach), also one whose session.ready is written but which is not live
// yet. Another client's session (another address's, without tokens) frees
// that client's place, not this one's.
func (s *Server) supersedesOwnLocked(client, conv string) bool {
	return conv != "" && slices.ContainsFunc(s.convs[conv], func(o *Session) bool { return o.client == client })
}

// claimClient counts the admitted sess against client (a phone call
// whose start brought its token), unless the client is at its limit.
func (s *Server) claimClient(sess *Session, client string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.claimClientLocked(sess, client, "")
}

// releaseClientLocked gives back sess's place of its client; s.mu is
// held.
func (s *Server) releaseClientLocked(sess *Session) {
	if sess.client == "" {
		return
	}
	if n := s.perClient[sess.client] - 1; n > 0 {
		s.perClient[sess.client] = n
	} else {
		delete(s.perClient, sess.client)
	}
	sess.client = ""
}
