package protocol_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/protocol"
)

// TestErrorMessagesBounded sends input an error message quotes: the
// message is cut to MaxErrorMessage bytes, at a character's start. Before,
// a 200 KB unknown field name came back whole in a 200 KB error.
func TestErrorMessagesBounded(t *testing.T) {
	for _, tc := range []struct {
		name, msg, want string
	}{
		{"unknown field", `{"type":"ping","clientTime":1,"` + strings.Repeat("f", 200_000) + `":1}`, "unknown field"},
		{"unknown field, multibyte", `{"type":"cancel","requestId":"a","` + strings.Repeat("é", 100_000) + `":1}`, "unknown field"},
		{"unknown type", `{"type":"` + strings.Repeat("x", 100_000) + `"}`, "unknown message type"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := protocol.DecodeText([]byte(tc.msg))
			pe, ok := err.(*protocol.Error)
			require.True(t, ok, "%v", err)
			require.Equal(t, protocol.CodeBadMessage, pe.Code)
			require.Contains(t, pe.Message, tc.want)
			require.LessOrEqual(t, len(strings.TrimSuffix(pe.Message, "…")), protocol.MaxErrorMessage)
			require.True(t, utf8.ValidString(pe.Message), "cut inside a character")
		})
	}
	// A message within the bound is left whole.
	require.Equal(t, "short", protocol.Errorf(protocol.CodeInternal, "short").Message)
}
