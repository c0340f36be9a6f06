package session_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/pipeline"
	"github.com/voiced/voiced/internal/session"
	"github.com/voiced/voiced/internal/voicedtest"
)

// TestClientAddr walks X-Forwarded-For: believed only from a trusted
// peer, from the right, skipping trusted hops; what the client wrote to
// the left of the first untrusted hop is never read.
func TestClientAddr(t *testing.T) {
	trusted, err := session.ParseTrustedProxies("10.0.0.0/8, 192.168.1.1, 2001:db8:ff::/48")
	require.NoError(t, err)
	for _, tc := range []struct {
		name   string
		peer   string   // RemoteAddr
		xff    []string // X-Forwarded-For headers, in order
		want   string
		public []netip.Prefix // overrides trusted when not nil
	}{
		{name: "no header", peer: "203.0.113.7:5000", want: "203.0.113.7"},
		{name: "spoofed by an untrusted peer", peer: "203.0.113.7:5000", xff: []string{"198.51.100.1"}, want: "203.0.113.7"},
		{name: "trusted peer, one hop", peer: "10.0.0.2:40000", xff: []string{"198.51.100.1"}, want: "198.51.100.1"},
		{name: "trusted peer, no header", peer: "10.0.0.2:40000", want: "10.0.0.2"},
		{name: "client's own header left of the real hop", peer: "10.0.0.2:40000",
			xff: []string{"1.2.3.4, 5.6.7.8, 198.51.100.1"}, want: "198.51.100.1"},
		{name: "two trusted proxies", peer: "10.0.0.2:40000",
			xff: []string{"1.2.3.4, 198.51.100.1, 192.168.1.1, 10.9.9.9"}, want: "198.51.100.1"},
		{name: "header lines joined in order", peer: "10.0.0.2:40000",
			xff: []string{"1.2.3.4", "198.51.100.1, 10.1.1.1"}, want: "198.51.100.1"},
		{name: "spoofed trusted address from the client", peer: "10.0.0.2:40000",
			xff: []string{"10.0.0.5, 198.51.100.1"}, want: "198.51.100.1"},
		{name: "every hop trusted", peer: "10.0.0.2:40000", xff: []string{"10.3.3.3, 10.4.4.4"}, want: "10.3.3.3"},
		{name: "empty elements", peer: "10.0.0.2:40000", xff: []string{"198.51.100.1,, ,"}, want: "198.51.100.1"},
		{name: "hop with a port", peer: "10.0.0.2:40000", xff: []string{"198.51.100.1:1234"}, want: "198.51.100.1"},
		{name: "IPv6 peer untrusted", peer: "[2001:db8::1]:443", xff: []string{"198.51.100.1"}, want: "2001:db8::1"},
		{name: "IPv6 trusted peer and client", peer: "[2001:db8:ff::2]:443", xff: []string{"2001:db8:1::9"}, want: "2001:db8:1::9"},
		{name: "IPv6 hop in brackets with a port", peer: "10.0.0.2:40000", xff: []string{"[2001:db8:1::9]:5060"}, want: "2001:db8:1::9"},
		{name: "IPv6 hop in brackets", peer: "10.0.0.2:40000", xff: []string{"[2001:db8:1::9]"}, want: "2001:db8:1::9"},
		{name: "IPv4-mapped peer", peer: "[::ffff:10.0.0.2]:40000", xff: []string{"198.51.100.1"}, want: "198.51.100.1"},
		{name: "IPv4-mapped hop", peer: "10.0.0.2:40000", xff: []string{"::ffff:198.51.100.1"}, want: "198.51.100.1"},
		{name: "malformed last hop: the proxy", peer: "10.0.0.2:40000", xff: []string{"198.51.100.1, garbage"}, want: "10.0.0.2"},
		{name: "malformed behind a trusted hop", peer: "10.0.0.2:40000", xff: []string{"not-an-ip, 10.7.7.7"}, want: "10.7.7.7"},
		{name: "malformed left of the client", peer: "10.0.0.2:40000", xff: []string{"<script>, 198.51.100.1"}, want: "198.51.100.1"},
		{name: "IPv6 hop's zone dropped", peer: "10.0.0.2:40000", xff: []string{"fe80::1%eth0"}, want: "fe80::1"},
		{name: "IPv6 hop's zone and port dropped", peer: "10.0.0.2:40000", xff: []string{"[2001:db8:1::9%25x]:5060"}, want: "2001:db8:1::9"},
		{name: "IPv6 zone of log text", peer: "10.0.0.2:40000", xff: []string{`fe80::1%" level=ERROR msg="forged`}, want: "fe80::1"},
		{name: "IPv6 peer's zone dropped", peer: "[fe80::1%eth0]:443", want: "fe80::1"},
		{name: "trusted IPv6 peer with a zone", peer: "[2001:db8:ff::2%eth0]:443", xff: []string{"2001:db8:1::9%eth1"}, want: "2001:db8:1::9"},
		{name: "unknown peer form", peer: "@unix", xff: []string{"198.51.100.1"}, want: "@unix"},
		{name: "no trusted proxies", peer: "10.0.0.2:40000", xff: []string{"198.51.100.1"}, want: "10.0.0.2", public: []netip.Prefix{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "/v1/session", nil)
			r.RemoteAddr = tc.peer
			for _, v := range tc.xff {
				r.Header.Add("X-Forwarded-For", v)
			}
			tr := trusted
			if tc.public != nil {
				tr = tc.public
			}
			require.Equal(t, tc.want, session.ClientAddr(r, tr))
		})
	}
}

func TestParseTrustedProxies(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    []string
		wantErr string
	}{
		{in: "", want: nil},
		{in: "10.0.0.0/8", want: []string{"10.0.0.0/8"}},
		{in: " 10.1.2.3/8 , 127.0.0.1 ,,2001:db8::/32", want: []string{"10.0.0.0/8", "127.0.0.1/32", "2001:db8::/32"}},
		{in: "::1", want: []string{"::1/128"}},
		{in: "::ffff:10.0.0.0/104", want: []string{"10.0.0.0/8"}},
		{in: "10.0.0.0/33", wantErr: `"10.0.0.0/33": not a CIDR prefix`},
		{in: "10.0.0.0/8,haproxy", wantErr: `"haproxy": not an address or CIDR prefix`},
		{in: "10.0.0.1:80", wantErr: `not an address`},
		{in: "10.0.0.0/8,0.0.0.0/0", wantErr: `"0.0.0.0/0": trusts every peer`},
		{in: "::/0", wantErr: `"::/0": trusts every peer`},
		{in: "::ffff:0.0.0.0/96", wantErr: `trusts every peer`},
	} {
		got, err := session.ParseTrustedProxies(tc.in)
		if tc.wantErr != "" {
			require.ErrorContains(t, err, tc.wantErr, tc.in)
			continue
		}
		require.NoError(t, err, tc.in)
		var s []string
		for _, p := range got {
			s = append(s, p.String())
		}
		require.Equal(t, tc.want, s, tc.in)
	}
}

// dialAs opens a session at u with headers h, or returns the refusal.
func dialAs(t *testing.T, h *harness, u string, hdr http.Header) (*client, *http.Response) {
	t.Helper()
	conn, resp, err := websocket.Dial(h.ctx, u, &websocket.DialOptions{HTTPHeader: hdr})
	if err != nil {
		require.NotNil(t, resp, "%v", err)
		return nil, resp
	}
	t.Cleanup(func() { conn.CloseNow() })
	c := &client{h: h, conn: conn}
	m := c.next()
	require.NoError(t, m.As(&c.ready))
	return c, resp
}

// requireClientLimit checks a refusal for -max-sessions-per-client: 429,
// Retry-After, a short plain-text body.
func requireClientLimit(t *testing.T, resp *http.Response) {
	t.Helper()
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	require.Equal(t, "5", resp.Header.Get("Retry-After"))
	require.True(t, strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain"), resp.Header.Get("Content-Type"))
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, "too many sessions for this client: try again once one of them ends\n", string(body))
}

// closeAndWait closes c's session and waits until the server has
// released it (sessions back to want).
func closeAndWait(t *testing.T, h *harness, c *client, want int) {
	t.Helper()
	require.NoError(t, c.conn.Close(websocket.StatusNormalClosure, ""))
	require.Eventually(t, func() bool { return h.srv.Sessions() == want }, testTimeout, time.Millisecond)
}

// TestMaxSessionsPerClientTenant: with tokens, the (N+1)th session of one
// tenant is refused with 429 before the upgrade while another tenant
// still gets in, and a session that ends frees its tenant's place. The
// access_token query parameter is the same tenant as the header.
func TestMaxSessionsPerClientTenant(t *testing.T) {
	const limit = 2
	h := newHarness(t, &fakeStages{}, pipeline.Config{}, session.Config{Tokens: []string{"alice", "bob"}, MaxSessionsPerClient: limit})
	u := "ws" + strings.TrimPrefix(h.http.URL, "http")
	alice := http.Header{"Authorization": {"Bearer alice"}}
	bob := http.Header{"Authorization": {"Bearer bob"}}

	var held []*client
	for range limit {
		c, resp := dialAs(t, h, u, alice)
		require.NotNil(t, c, "refused: %d", resp.StatusCode)
		held = append(held, c)
	}
	_, resp := dialAs(t, h, u, alice)
	requireClientLimit(t, resp)
	_, resp = dialAs(t, h, u+"?access_token=alice", nil)
	requireClientLimit(t, resp)
	require.Equal(t, float64(2), metricValue(t, h, `voiced_session_upgrades_total{outcome="refused_client_limit"}`))

	c, resp := dialAs(t, h, u, bob)
	require.NotNil(t, c, "another tenant refused: %d", resp.StatusCode)
	require.Equal(t, limit+1, h.srv.Sessions())

	closeAndWait(t, h, held[0], limit)
	c, resp = dialAs(t, h, u, alice)
	require.NotNil(t, c, "a freed place refused: %d", resp.StatusCode)
	_, resp = dialAs(t, h, u, alice)
	requireClientLimit(t, resp)
	require.Equal(t, float64(3), metricValue(t, h, `voiced_session_upgrades_total{outcome="refused_client_limit"}`))
}

// TestMaxSessionsPerClientAddress: without tokens a client is its
// address: the peer's, or X-Forwarded-For's from a trusted proxy. A
// header from a peer that is not trusted changes nothing.
func TestMaxSessionsPerClientAddress(t *testing.T) {
	xff := func(a string) http.Header { return http.Header{"X-Forwarded-For": {a}} }
	t.Run("trusted proxy", func(t *testing.T) {
		loop, err := session.ParseTrustedProxies("127.0.0.0/8,::1")
		require.NoError(t, err)
		h := newHarness(t, &fakeStages{}, pipeline.Config{}, session.Config{MaxSessionsPerClient: 1, TrustedProxies: loop})
		u := "ws" + strings.TrimPrefix(h.http.URL, "http")
		c, resp := dialAs(t, h, u, xff("198.51.100.1"))
		require.NotNil(t, c, "refused: %d", resp.StatusCode)
		_, resp = dialAs(t, h, u, xff("203.0.113.9, 198.51.100.1")) // its own header in front
		requireClientLimit(t, resp)
		other, resp := dialAs(t, h, u, xff("198.51.100.2"))
		require.NotNil(t, other, "another address refused: %d", resp.StatusCode)
		closeAndWait(t, h, c, 1)
		c, resp = dialAs(t, h, u, xff("198.51.100.1"))
		require.NotNil(t, c, "a freed place refused: %d", resp.StatusCode)
	})
	t.Run("IPv6 by its /64", func(t *testing.T) {
		loop, err := session.ParseTrustedProxies("127.0.0.0/8,::1")
		require.NoError(t, err)
		h := newHarness(t, &fakeStages{}, pipeline.Config{}, session.Config{MaxSessionsPerClient: 1, TrustedProxies: loop})
		u := "ws" + strings.TrimPrefix(h.http.URL, "http")
		c, resp := dialAs(t, h, u, xff("2001:db8:1:2::1"))
		require.NotNil(t, c, "refused: %d", resp.StatusCode)
		// Another address of the same /64: one host or home network.
		_, resp = dialAs(t, h, u, xff("2001:db8:1:2:aaaa:bbbb:cccc:dddd"))
		requireClientLimit(t, resp)
		other, resp := dialAs(t, h, u, xff("2001:db8:1:3::1"))
		require.NotNil(t, other, "another /64 refused: %d", resp.StatusCode)
	})
	t.Run("refusal logged with the client's address", func(t *testing.T) {
		loop, err := session.ParseTrustedProxies("127.0.0.1,::1")
		require.NoError(t, err)
		var logs voicedtest.LogBuffer
		reg := prometheus.NewRegistry()
		fake := &fakeStages{}
		pl, err := pipeline.New(pipeline.Config{}, pipeline.Stages{STT: fake, Intent: fake, Retrieval: fake, LLM: fake}, pipeline.NewMetrics(reg))
		require.NoError(t, err)
		srv := session.NewServer(session.Config{MaxSessionsPerClient: 1, TrustedProxies: loop}, pl,
			slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})), session.NewMetrics(reg))
		hs := httptest.NewServer(srv)
		t.Cleanup(func() {
			require.NoError(t, srv.Close())
			hs.Close()
		})
		h := &harness{t: t, ctx: t.Context(), srv: srv, http: hs, fake: fake, reg: reg}
		u := "ws" + strings.TrimPrefix(hs.URL, "http")
		c, resp := dialAs(t, h, u, xff("198.51.100.7"))
		require.NotNil(t, c, "refused: %d", resp.StatusCode)
		_, resp = dialAs(t, h, u, xff("198.51.100.7"))
		requireClientLimit(t, resp)
		require.Contains(t, logs.String(), `outcome=refused_client_limit tenant="" addr=198.51.100.7`)
	})
	t.Run("untrusted peer", func(t *testing.T) {
		h := newHarness(t, &fakeStages{}, pipeline.Config{}, session.Config{MaxSessionsPerClient: 1})
		u := "ws" + strings.TrimPrefix(h.http.URL, "http")
		c, resp := dialAs(t, h, u, xff("198.51.100.1"))
		require.NotNil(t, c, "refused: %d", resp.StatusCode)
		_, resp = dialAs(t, h, u, xff("198.51.100.2")) // spoofed: the same peer
		requireClientLimit(t, resp)
	})
}

// TestMaxSessionsPerClientResume: a client at its limit whose connection
// went half-open resumes its conversation: the resume supersedes the
// session still open here, so it is admitted over the limit, and that
// session's end brings the client back to it.
func TestMaxSessionsPerClientResume(t *testing.T) {
	h := newHarness(t, &fakeStages{}, pipeline.Config{}, session.Config{Tokens: []string{"alice"}, MaxSessionsPerClient: 1})
	u := "ws" + strings.TrimPrefix(h.http.URL, "http")
	alice := http.Header{"Authorization": {"Bearer alice"}}
	old, resp := dialAs(t, h, u, alice)
	require.NotNil(t, old, "refused: %d", resp.StatusCode)
	c, resp := dialAs(t, h, u+"?resume="+old.ready.ResumeToken, alice)
	require.NotNil(t, c, "resume refused: %d", resp.StatusCode)
	require.True(t, c.ready.Resumed)
	require.Eventually(t, func() bool { return h.srv.Sessions() == 1 }, testTimeout, time.Millisecond)
	_, resp = dialAs(t, h, u, alice)
	requireClientLimit(t, resp)
}

// TestMaxSessionsPerClientTwilio: phone calls count against their
// token's tenant, also one brought by start (refused then with 1008, as
// the upgrade is past), and against the Twilio account when Twilio signed
// them.
func TestMaxSessionsPerClientTwilio(t *testing.T) {
	t.Run("tenant", func(t *testing.T) {
		h := newHarness(t, &fakeStages{}, pipeline.Config{},
			session.Config{Tokens: []string{"alice", "bob"}, MaxSessionsPerClient: 1, Greeting: "-"})
		c, resp := dialAs(t, h, "ws"+strings.TrimPrefix(h.http.URL, "http"), http.Header{"Authorization": {"Bearer alice"}})
		require.NotNil(t, c, "refused: %d", resp.StatusCode)
		hs := httptest.NewServer(http.HandlerFunc(h.srv.ServeTwilio))
		t.Cleanup(hs.Close)
		url := "ws" + strings.TrimPrefix(hs.URL, "http") + "/v1/twilio"
		_, resp, err := websocket.Dial(h.ctx, url+"?token=alice", nil)
		require.Error(t, err)
		requireClientLimit(t, resp)

		tw := dialTwilioAt(t, h, url) // the token comes in start
		tw.start(map[string]string{"token": "alice"})
		for range tw.msgs {
		}
		<-tw.done
		require.Equal(t, websocket.StatusPolicyViolation, websocket.CloseStatus(tw.closeErr), "%v", tw.closeErr)
		require.Equal(t, float64(2), metricValue(t, h, `voiced_session_upgrades_total{outcome="refused_client_limit"}`))

		dialTwilioAt(t, h, url).start(map[string]string{"token": "bob"})
		closeAndWait(t, h, c, 1)
		tw = dialTwilioAt(t, h, url+"?token=alice")
		tw.start(nil)
		require.Eventually(t, func() bool { return h.srv.Sessions() == 2 }, testTimeout, time.Millisecond)
	})
	t.Run("signed", func(t *testing.T) {
		const authToken = "tw-auth-s3cret"
		h := newHarness(t, &fakeStages{}, pipeline.Config{},
			session.Config{Tokens: []string{"alice"}, TwilioAuthToken: authToken, MaxSessionsPerClient: 1, Greeting: "-"})
		hs := httptest.NewServer(http.HandlerFunc(h.srv.ServeTwilio))
		t.Cleanup(hs.Close)
		url := "ws" + strings.TrimPrefix(hs.URL, "http") + "/v1/twilio"
		signed := http.Header{"X-Twilio-Signature": {twilioSign(authToken, url)}}
		dialTwilioWith(t, h, url, &websocket.DialOptions{HTTPHeader: signed}).start(nil)
		_, resp, err := websocket.Dial(h.ctx, url, &websocket.DialOptions{HTTPHeader: signed})
		require.Error(t, err)
		requireClientLimit(t, resp)
		// The account is not a tenant: alice still gets in.
		c, resp := dialAs(t, h, "ws"+strings.TrimPrefix(h.http.URL, "http"), http.Header{"Authorization": {"Bearer alice"}})
		require.NotNil(t, c, "refused: %d", resp.StatusCode)
	})
}

// TestTenantReachesAnswerGenerator: a session's requests carry its
// tenant to the answer generator (the LLM's cost cap per tenant): the
// same for the same token (header or query, resumed or not), another for
// another token, none on a server without tokens.
func TestTenantReachesAnswerGenerator(t *testing.T) {
	tenantOf := func(h *harness, c *client) string {
		t.Helper()
		c.audio("r1", 0, true, time.Now().Add(5*time.Second))
		term, _ := c.terminal("r1")
		resultOf(t, term)
		h.fake.mu.Lock()
		defer h.fake.mu.Unlock()
		return h.fake.reqs[len(h.fake.reqs)-1].Tenant
	}
	h := newHarness(t, &fakeStages{}, pipeline.Config{}, session.Config{Tokens: []string{"alice", "bob"}})
	u := "ws" + strings.TrimPrefix(h.http.URL, "http")
	a1, _ := dialAs(t, h, u, http.Header{"Authorization": {"Bearer alice"}})
	ta := tenantOf(h, a1)
	require.NotEmpty(t, ta)
	a2, _ := dialAs(t, h, u+"?access_token=alice&resume="+a1.ready.ResumeToken, nil)
	require.Equal(t, ta, tenantOf(h, a2))
	b, _ := dialAs(t, h, u, http.Header{"Authorization": {"Bearer bob"}})
	tb := tenantOf(h, b)
	require.NotEmpty(t, tb)
	require.NotEqual(t, ta, tb)

	open := newHarness(t, &fakeStages{}, pipeline.Config{}, session.Config{})
	c, _ := dialAs(t, open, "ws"+strings.TrimPrefix(open.http.URL, "http"), nil)
	require.Empty(t, tenantOf(open, c))
}

// TestMaxSessionsPerClientResumeBounded: the resume admitted over the
// limit is the client's own, and one over it at most. A superseded
// session keeps its place until its requests in flight end (their
// deadline): a client that resumed again meanwhile stacked such sessions
// past its limit, one more per resume; and without tokens a client (an
// address) resuming a conversation another address holds ended that
// address's session and kept the place it took, so two addresses taking
// turns grew one past its limit for ever.
func TestMaxSessionsPerClientResumeBounded(t *testing.T) {
	t.Run("stacked behind requests in flight", func(t *testing.T) {
		release := make(chan struct{})
		fake := &fakeStages{started: make(chan string, 16)}
		fake.generate = func(ctx context.Context, emit func(string)) (pipeline.Generation, error) {
			select {
			case <-release:
			case <-ctx.Done():
				return pipeline.Generation{}, context.Cause(ctx)
			}
			emit("answer.")
			return pipeline.Generation{Provider: "fake"}, nil
		}
		pcfg := pipeline.Config{}
		pcfg.LLM.Cap = 20 * time.Second
		h := newHarness(t, fake, pcfg, session.Config{Tokens: []string{"alice"}, MaxSessionsPerClient: 1, MaxBudget: 30 * time.Second})
		t.Cleanup(func() { close(release) })
		u := "ws" + strings.TrimPrefix(h.http.URL, "http")
		alice := http.Header{"Authorization": {"Bearer alice"}}
		atLLM := func() {
			t.Helper()
			for {
				select {
				case s := <-fake.started:
					if s == pipeline.StageLLM {
						return
					}
				case <-h.ctx.Done():
					t.Fatal("request never reached its LLM stage")
				}
			}
		}
		c, resp := dialAs(t, h, u, alice)
		require.NotNil(t, c, "refused: %d", resp.StatusCode)
		c.audio("r1", 0, true, time.Now().Add(20*time.Second)) // final: runs on once superseded
		atLLM()
		// The client's network changed: it resumes, over the limit.
		c2, resp := dialAs(t, h, u+"?resume="+c.ready.ResumeToken, alice)
		require.NotNil(t, c2, "resume refused: %d", resp.StatusCode)
		c2.audio("r2", 0, true, time.Now().Add(20*time.Second))
		atLLM()
		require.Equal(t, 2, h.srv.Sessions(), "the superseded session waits for r1")
		// Again, while the first session still waits for r1: a third place.
		c3, resp := dialAs(t, h, u+"?resume="+c2.ready.ResumeToken, alice)
		require.Nil(t, c3, "a resume two over the limit was admitted")
		requireClientLimit(t, resp)
	})
	t.Run("another address's conversation", func(t *testing.T) {
		loop, err := session.ParseTrustedProxies("127.0.0.0/8,::1")
		require.NoError(t, err)
		h := newHarness(t, &fakeStages{}, pipeline.Config{}, session.Config{MaxSessionsPerClient: 1, TrustedProxies: loop})
		u := "ws" + strings.TrimPrefix(h.http.URL, "http")
		from := func(a string) http.Header { return http.Header{"X-Forwarded-For": {a}} }
		y, resp := dialAs(t, h, u, from("198.51.100.2"))
		require.NotNil(t, y, "refused: %d", resp.StatusCode)
		for i := range 3 {
			// 198.51.100.1 opens a conversation, and 198.51.100.2, at its
			// limit, takes it over.
			x, resp := dialAs(t, h, u, from("198.51.100.1"))
			require.NotNil(t, x, "round %d: refused: %d", i, resp.StatusCode)
			got, resp := dialAs(t, h, u+"?resume="+x.ready.ResumeToken, from("198.51.100.2"))
			require.Nil(t, got, "round %d: 198.51.100.2 got a session past its limit", i)
			requireClientLimit(t, resp)
			closeAndWait(t, h, x, 1)
		}
	})
}
