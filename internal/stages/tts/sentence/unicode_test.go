package sentence

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

// A title or an initial after a space of more than one byte (a no-break
// space, as typesetting and LLMs put between "Dr." and a name, or between
// initials; a thin space) is still a title or an initial: the word before
// a period starts after that space, not inside it.
func TestAbbreviationAfterWideSpace(t *testing.T) {
	for _, tt := range []struct {
		name, in string
		want     []string
	}{
		{"no-break space before a title", "Ask\u00a0Dr. Lee about it. She knows.", []string{"Ask\u00a0Dr. Lee about it.", "She knows."}},
		{"no-break spaces between initials", "J.\u00a0R.\u00a0Smith wrote it. Read it.", []string{"J.\u00a0R.\u00a0Smith wrote it.", "Read it."}},
		{"narrow no-break space before e.g.", "Use a card,\u202fe.g. Visa. Then pay.", []string{"Use a card,\u202fe.g. Visa.", "Then pay."}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var s Splitter
			got := append(s.Feed(tt.in), s.Flush()...)
			require.Equal(t, tt.want, texts(got))
		})
	}
}

// TestFullwidthStops: 。！？ end a sentence although no space follows
// them, with their closing quotes.
func TestFullwidthStops(t *testing.T) {
	var s Splitter
	got := texts(s.Feed("您的订单已发货。「请查收。」明天到！还有问题？"))
	require.Equal(t, []string{"您的订单已发货。", "「请查收。」", "明天到！"}, got, "the last one may still get a closing quote")
	require.Equal(t, []string{"还有问题？"}, texts(s.Flush()))
}

// TestNoSpaceIsCutEventually: text without a space (a long URL, a
// script without spaces) waits for one, but only up to hardLimit times
// MaxLen; then it is cut between two characters. Fed a byte at a time,
// it was kept whole (40 KB: a buffer rescanned on every byte, 11 s) and
// reached the engine as one request.
func TestNoSpaceIsCutEventually(t *testing.T) {
	in := strings.Repeat("字", 20000) // 60 KB, 3 bytes a character
	s := Splitter{}
	var all []Sentence
	for i := 0; i < len(in); i++ {
		all = append(all, s.Feed(in[i:i+1])...)
	}
	all = append(all, s.Flush()...)
	var joined strings.Builder
	for _, sen := range all {
		require.True(t, utf8.ValidString(sen.Text), "cut between characters")
		require.LessOrEqual(t, len(sen.Text), hardLimit*DefaultMaxLen, "the rest, at Flush, is at most the hard limit")
		joined.WriteString(sen.Text)
	}
	require.Equal(t, in, joined.String(), "nothing lost")
	require.Greater(t, len(all), 200)
}
