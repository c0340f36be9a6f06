package flite

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestClean(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"plain ascii, 12.50!", "plain ascii, 12.50!"},
		{"café crème", "cafe creme"},
		{"Straße", "Strasse"},
		{"“quoted” ‘single’", `"quoted" 'single'`},
		{"wait…", "wait..."},
		{"a—b", "a, b"},
		{"**bold** and _it_ `code` # Title", "  bold   and  it   code    Title"},
		{"emoji 😀 here", "emoji   here"},
		{"line\nbreak\ttab", "line break tab"},
		{"日本", "  "},
		{"bad \xff byte", "bad   byte"},
		{"", ""},
		{"costs 5 😀.", "costs 5."},
		{"wait ... what ,really", "wait... what,really"},
		{" . leading", " . leading"},
		{"a" + strings.Repeat(".", 400), "a..."},
		{"Sure!!!!!!?!", "Sure!!!"},
		{"no... what?!", "no... what?!"},
		{"see " + strings.Repeat("x", 41) + " here", "see  here"},
		{"a " + strings.Repeat("x", 40), "a " + strings.Repeat("x", 40)},
	} {
		got, offsets := Clean(tt.in)
		require.Equal(t, tt.want, got, tt.in)
		require.Len(t, offsets, len(got)+1)
		require.Equal(t, len(tt.in), offsets[len(got)])
		for i := 1; i < len(offsets); i++ {
			require.GreaterOrEqual(t, offsets[i], offsets[i-1], "offsets go forward")
		}
	}
	// Offsets lead back to the original: "crème" in the cleaned text is
	// "crème" in the original.
	in := "café crème"
	got, off := Clean(in)
	require.Equal(t, "crème", in[off[5]:off[len(got)]])
}

func TestSpeakable(t *testing.T) {
	for in, want := range map[string]bool{"": false, "   ": false, "...!?": false, "a": true, "42": true, " , x": true} {
		require.Equal(t, want, speakable(in), in)
	}
}
