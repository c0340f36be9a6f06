package domain

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// HTML comments are removed before anything else (docs/domain.md): an
// editor's note above the front matter, or inside it, does not hide it.
// The front matter after a note was read as the article's first line and
// the article refused ("must start with its title"), naming the "---".
func TestArticleCommentAroundFrontMatter(t *testing.T) {
	tests := []struct {
		name, article string
		keywords      []string
	}{
		{"note above", "<!-- reviewed by Sam -->\n---\nkeywords: [hours]\n---\n# X\n\nWe open at nine.\n", []string{"hours"}},
		{"note of several lines above", "<!--\nreviewed\nby Sam\n-->\n\n---\nkeywords: [hours]\n---\n# X\n\nWe open at nine.\n", []string{"hours"}},
		{"note inside", "---\n<!-- add more -->\nkeywords: [hours]\n---\n# X\n\nWe open at nine.\n", []string{"hours"}},
		{"front matter commented out", "<!--\n---\nkeywords: [hours]\n---\n-->\n# X\n\nWe open at nine.\n", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := LoadFS(mapFS(map[string]string{IntentsFile: reviewIntents, "articles/x.md": tt.article}), "dom")
			require.NoError(t, err)
			a := d.Articles[0]
			require.Equal(t, "X", a.Title)
			require.Equal(t, tt.keywords, a.Keywords)
			require.Equal(t, []Paragraph{{Text: "We open at nine."}}, a.Paragraphs())
		})
	}
	// Errors still name the article's own lines.
	_, err := LoadFS(mapFS(map[string]string{IntentsFile: reviewIntents, "articles/x.md": "<!-- note -->\n---\ntags: [hours]\n---\n# X\n\nText.\n"}), "dom")
	require.EqualError(t, err, `load domain dom: dom/articles/x.md:3: unknown front matter field "tags" (want keywords or classes)`)
}
