package session

import (
	"errors"
	"testing"
	"time"
	"unicode/utf8"
)

// FuzzResumeToken: a resume token is the client's to send, so anything
// may come as ?resume=. checkToken refuses with one of the four resume
// errors whatever it is given, and accepts only a token issueToken made
// with the same secret: its conversation and tenant come back as issued;
// the same token is refused, each with its own error, by a server with
// another secret (forged), for another client's credentials (foreign),
// and once it has expired; and a byte changed, added or removed anywhere
// (where the input says), or anything short of the whole, is refused as
// malformed or forged.
func FuzzResumeToken(f *testing.F) {
	for _, s := range []struct{ secret, conv, access, tok string }{
		{"fleet secret", "4f9ad3b2-8d0e-4c47-9a41-27b5f0f5e6a1", "tok-alice", ""},
		{"", "c", "", "e30.x"},
		{"s", "4f9ad3b2-8d0e-4c47-9a41-27b5f0f5e6a1", "tok", "eyJjIjoiYyIsInQiOiIiLCJlIjo5OTk5OTk5OTk5OTk5fQ.AAAA"},
		{"s", "conv", "tok", "."},
		{"s", "", "tok", "no-dot"},
		{"s", "conv\x00\"é", "tok", "a.b.c"},
		{"s", "conv", "tok", "eyJjIjoiYyJ9.====="},
	} {
		f.Add([]byte(s.secret), s.conv, s.access, s.tok, uint16(0), byte('A'))
	}
	f.Fuzz(func(t *testing.T, secret []byte, conv, access, tok string, at uint16, b byte) {
		srv := &Server{cfg: Config{ResumeSecret: secret, ResumeTTL: time.Hour}}
		mine := srv.tenantsOfToken(access)
		known := func(err error) bool {
			for _, e := range []error{ErrTokenMalformed, ErrTokenForged, ErrTokenExpired, ErrTokenForeign} {
				if errors.Is(err, e) {
					return true
				}
			}
			return false
		}

		// Whatever a client sends.
		if _, err := srv.checkToken(tok, mine); err == nil || !known(err) {
			t.Fatalf("checkToken(%q) = %v: want one of the resume errors", tok, err)
		}

		issued := srv.issueToken(conv, mine.id)
		c, err := srv.checkToken(issued, mine)
		switch {
		case conv == "":
			if !errors.Is(err, ErrTokenMalformed) {
				t.Fatalf("a token without a conversation: %v, want %v", err, ErrTokenMalformed)
			}
			return
		case err != nil:
			t.Fatalf("checkToken(issueToken(%q)) = %v", conv, err)
		case c.Tenant != mine.id || utf8.ValidString(conv) && c.Conv != conv:
			t.Fatalf("issued for %q of %q, verified as %q of %q", conv, mine.id, c.Conv, c.Tenant)
		}
		// A token the previous build issued (the plain hash) is still this
		// client's.
		if _, err := srv.checkToken(srv.issueToken(conv, mine.legacy), mine); err != nil {
			t.Fatalf("a token of the legacy tenant: %v", err)
		}

		other := &Server{cfg: Config{ResumeSecret: append([]byte("other "), secret...), ResumeTTL: time.Hour}}
		if _, err := other.checkToken(issued, mine); !errors.Is(err, ErrTokenForged) {
			t.Fatalf("another secret: %v, want %v", err, ErrTokenForged)
		}
		if _, err := srv.checkToken(issued, srv.tenantsOfToken(access+"x")); !errors.Is(err, ErrTokenForeign) {
			t.Fatalf("another client's credentials: %v, want %v", err, ErrTokenForeign)
		}
		old := &Server{cfg: Config{ResumeSecret: secret, ResumeTTL: -time.Millisecond}}
		if _, err := srv.checkToken(old.issueToken(conv, mine.id), mine); !errors.Is(err, ErrTokenExpired) {
			t.Fatalf("an expired token: %v, want %v", err, ErrTokenExpired)
		}

		refused := func(what, tok string) {
			if _, err := srv.checkToken(tok, mine); !errors.Is(err, ErrTokenMalformed) && !errors.Is(err, ErrTokenForged) {
				t.Fatalf("%s (%q of %q): %v, want malformed or forged", what, tok, issued, err)
			}
		}
		i := int(at) % len(issued)
		if b == issued[i] {
			b ^= 1
		}
		refused("one byte changed", issued[:i]+string(b)+issued[i+1:])
		refused("one byte more", issued[:i]+string(b)+issued[i:])
		refused("one byte less", issued[:i]+issued[i+1:])
		// About 64 prefixes, each at most len(issued) to sign: every
		// prefix of a long token made the fuzzer quadratic.
		for n := 0; n < len(issued); n += max(1, len(issued)/64) {
			refused("a prefix", issued[:n])
		}
		refused("all but the last byte", issued[:len(issued)-1])
	})
}
