package provider

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

// A provider's message or code cut to its bound is cut at a character:
// cut at a byte, "é…" or "ж…" ended in half a character, invalid UTF-8
// in every log line and error that quoted it.
func TestRedactCutsAtACharacter(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		f    func(string, ...string) string
	}{
		{"message, two-byte letters", strings.Repeat("é", 400), Redact},
		{"message, odd start", "x" + strings.Repeat("ж", 400), Redact},
		{"code, three-byte letters", strings.Repeat("€", 40), RedactCode},
		{"code, odd start", "x" + strings.Repeat("é", 60), RedactCode},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := tc.f(tc.in)
			require.True(t, utf8.ValidString(out), "%q", out)
			require.True(t, strings.HasSuffix(out, "..."))
			require.Less(t, len(out), len(tc.in))
		})
	}
}
