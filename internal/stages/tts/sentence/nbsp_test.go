package sentence

import (
	"testing"

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
