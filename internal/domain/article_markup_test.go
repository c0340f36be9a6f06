package domain

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// reviewIntents links intent "hours" to the article "x" under test.
const reviewIntents = "intents:\n  - name: hours\n    articles: [x]\n    examples: [when are you open]\n  - name: bye\n    examples: [goodbye now]\n"

// Markdown that renders as nothing must not become passages: an editor's
// HTML comment was indexed, quoted by the extractive answer and spoken to
// callers ("<!-- TODO: confirm the holiday hours with Sam -->"), a
// thematic break ("---") was a passage of its own, the first, so the
// intent's examples were indexed with it and the text's passages were
// numbered from #2, and an ATX heading's closing #s stayed in the title
// every source cites ("Opening hours #").
func TestArticleMarkupThatRendersAsNothing(t *testing.T) {
	article := "# Opening hours #\n\n---\n\nWe open at nine.\n\n<!-- TODO: confirm the holiday\n\nhours with Sam -->\n\n## Holidays ##\n\nWe close on holidays.\n\n***\n\n- - -\n\n___\n\nSetext section\n--------------\n\nWe close early on Fridays.\n"
	d, err := LoadFS(mapFS(map[string]string{IntentsFile: reviewIntents, "articles/x.md": article}), "dom")
	require.NoError(t, err)
	a := d.Articles[0]
	require.Equal(t, "Opening hours", a.Title)
	require.NotContains(t, a.Body, "TODO")
	require.Equal(t, []Paragraph{
		{Heading: "", Text: "We open at nine."},
		{Heading: "Holidays", Text: "We close on holidays."},
		{Heading: "Setext section", Text: "We close early on Fridays."},
	}, a.Paragraphs())
	require.Equal(t, "x#1", d.Passages("x")[0].ID)
	require.Equal(t, "We open at nine.", d.Passages("x")[0].Text)
	for _, s := range d.CorpusSentences() {
		require.NotContains(t, s, "TODO", "the recogniser's corpus")
		require.NotContains(t, s, "#", "the recogniser's corpus")
	}
}

// An article whose text is only a thematic break or a comment has no text
// after the title: refused, as an article with none is.
func TestArticleOnlyMarkupIsEmpty(t *testing.T) {
	for name, article := range map[string]string{
		"break":   "# X\n\n---\n",
		"comment": "# X\n\n<!-- to do -->\n",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := LoadFS(mapFS(map[string]string{IntentsFile: reviewIntents, "articles/x.md": article}), "dom")
			requireFileLineError(t, err, "dom/articles/x.md", 1, "no text after the title")
		})
	}
}

// An HTML comment left open would hide the rest of the article: refused,
// naming its line.
func TestArticleUnclosedComment(t *testing.T) {
	_, err := LoadFS(mapFS(map[string]string{IntentsFile: reviewIntents, "articles/x.md": "# X\n\nText.\n\n<!-- draft\n\nMore.\n"}), "dom")
	requireFileLineError(t, err, "dom/articles/x.md", 5, "comment")
}

// Front matter whose fields are all commented out ("# keywords: [a]")
// holds nothing, as an empty block does: it loaded as "articles/x.md:
// empty file", which the file is not.
func TestFrontMatterOnlyComments(t *testing.T) {
	d, err := LoadFS(mapFS(map[string]string{IntentsFile: reviewIntents, "articles/x.md": "---\n# keywords: [swap]\n---\n# X\n\nText.\n"}), "dom")
	require.NoError(t, err)
	require.Equal(t, "X", d.Articles[0].Title)
	require.Empty(t, d.Articles[0].Keywords)
}

// docs/domain.md: "every file is UTF-8 (the error names the line of the
// first other byte)". An article named no line, and spoken.tsv was not
// checked at all: a Latin-1 transcript was trained on as it was.
func TestEveryFileUTF8NamesLine(t *testing.T) {
	for name, files := range map[string]map[string]string{
		"articles/x.md": {IntentsFile: reviewIntents, "articles/x.md": "# X\n\ncaf\xe9 au lait\n"},
		"spoken.tsv":    {IntentsFile: reviewIntents, "articles/x.md": "# X\n\nText.\n", "spoken.tsv": "# voice\texample\ttranscript\nslt\twhen are you open\twhen are you open\nslt\tgoodbye now\tgood by caf\xe9\n"},
		"classes/c.txt": {IntentsFile: reviewIntents, "articles/x.md": "# X\n\nText.\n", "classes/c.txt": "# drinks\ntea\ncaf\xe9\n"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := LoadFS(mapFS(files), "dom")
			requireFileLineError(t, err, "dom/"+name, 3, "UTF-8")
			require.True(t, strings.HasPrefix(err.Error(), "load domain dom: dom/"+name+":3: "), "%v", err)
		})
	}
}
