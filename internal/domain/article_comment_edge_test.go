package domain

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// CommonMark (0.31): "<!-->" and "<!--->" are whole (empty) HTML
// comments, as in HTML. The stripper read them as a comment left open:
// the article was refused ("HTML comment not closed"), or, with a "-->"
// further on, the text between was dropped from the passages.
func TestArticleEmptyHTMLComment(t *testing.T) {
	for name, c := range map[string]string{"<!-->": "<!-->", "<!--->": "<!--->"} {
		t.Run(name, func(t *testing.T) {
			article := "# X\n\nWe open at nine." + c + "\n\nWe close at five.\n\n<!-- note -->\n"
			d, err := LoadFS(mapFS(map[string]string{IntentsFile: reviewIntents, "articles/x.md": article}), "dom")
			require.NoError(t, err)
			require.Equal(t, []Paragraph{{Text: "We open at nine."}, {Text: "We close at five."}}, d.Articles[0].Paragraphs())
		})
	}
}

// A "<!--" inside a code span is text, not a comment (CommonMark): an
// article that shows it ("type `<!--`") was refused as a comment left
// open, or lost the text up to the next "-->".
func TestArticleCommentOpenerInCodeSpan(t *testing.T) {
	article := "# X\n\nType `<!--` to start a note.\n\nThen type `-->` to end it.\n"
	d, err := LoadFS(mapFS(map[string]string{IntentsFile: reviewIntents, "articles/x.md": article}), "dom")
	require.NoError(t, err)
	require.Equal(t, []Paragraph{{Text: "Type <!-- to start a note."}, {Text: "Then type --> to end it."}}, d.Articles[0].Paragraphs())
}
