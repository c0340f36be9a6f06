package flite

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// An answer with SSML or HTML in it (an LLM told to mark its speech up,
// a passage quoted with its tags) had the tags read aloud: "speak hello
// break time equals one s slash there slash speak". Tags are left out;
// a "<" that opens none is a space as before.
func TestCleanLeavesOutMarkup(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{`<speak>Hello <break time="1s"/> there</speak>`, " Hello   there "},
		{"line one<br>line two", "line one line two"},
		{"<p>Tap <b>Orders</b>.</p>", " Tap  Orders. "},
		{"<!-- note --> Hi", "  Hi"},
		{`<?xml version="1.0"?><speak>Hi</speak>`, "  Hi "},
		{"if a < b and c > d", "if a   b and c   d"},
		{"x <= 5", "x  = 5"},
		{"a <3 b", "a  3 b"},
		{"open <tag never closed", "open  tag never closed"},
		{"<a\nhref>", " a href "},
		{"<", " "},
		{"</", " /"},
	} {
		got, offsets := Clean(tt.in)
		require.Equal(t, tt.want, got, tt.in)
		require.Len(t, offsets, len(got)+1)
		require.Equal(t, len(tt.in), offsets[len(got)])
	}
	// The words after a tag still lead back to the original text.
	in := "<p>Tap <b>Orders</b>.</p>"
	got, off := Clean(in)
	i := len(" Tap  ")
	require.Equal(t, "Orders", got[i:i+6])
	require.Equal(t, "Orders", in[off[i]:off[i+5]+1])
}
