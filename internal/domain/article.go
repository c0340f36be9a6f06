package domain

import (
	"bytes"
	"path"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Paragraph is one paragraph of an article, as plain text, with the heading
// of the section it is in ("" before the first "## " heading).
type Paragraph struct {
	Heading string
	Text    string
}

// PassageID is the id of the seq-th passage (from 1) of an article, as
// Domain.Passages and the retrieval stage give them: "gift-cards#2".
func PassageID(article string, seq int) string {
	return article + "#" + strconv.Itoa(seq)
}

// ArticleOf returns the article id of a passage id made by PassageID
// ("gift-cards#2" -> "gift-cards"); an id without "#" is returned whole.
func ArticleOf(passageID string) string {
	if i := strings.LastIndexByte(passageID, '#'); i >= 0 {
		return passageID[:i]
	}
	return passageID
}

// parseArticle checks an article file: UTF-8, a "# Title" as its first
// non-blank line, and some text after it.
func parseArticle(file, name string, data []byte) (Article, error) {
	a := Article{ID: strings.TrimSuffix(path.Base(name), ".md"), Path: name}
	if !utf8.Valid(data) {
		return a, &Error{File: file, Msg: "not UTF-8 text"}
	}
	data = bytes.TrimPrefix(data, []byte("\ufeff"))
	lines := strings.Split(strings.ReplaceAll(string(data), "\r\n", "\n"), "\n")
	titleLine := -1
	for i, l := range lines {
		if strings.TrimSpace(l) == "" {
			continue
		}
		// The title is checked as it will be used, without markup: "# **"
		// is no title.
		if !strings.HasPrefix(l, "# ") || plain(l[2:]) == "" {
			return a, &Error{File: file, Line: i + 1, Msg: `an article must start with its title as "# Title"`}
		}
		titleLine = i
		break
	}
	if titleLine < 0 {
		return a, &Error{File: file, Line: 1, Msg: "empty article"}
	}
	a.Title = plain(lines[titleLine][2:])
	a.Body = strings.TrimSpace(strings.Join(lines[titleLine+1:], "\n"))
	if len(a.Paragraphs()) == 0 {
		return a, &Error{File: file, Line: titleLine + 1, Msg: "empty article: no text after the title"}
	}
	return a, nil
}

// Paragraphs splits the article body into paragraphs at blank lines and
// headings; each list item is a paragraph of its own. Markdown markup is
// removed.
func (a Article) Paragraphs() []Paragraph {
	var (
		out     []Paragraph
		heading string
		cur     []string
	)
	flush := func() {
		if t := plain(strings.Join(cur, " ")); t != "" {
			out = append(out, Paragraph{Heading: heading, Text: t})
		}
		cur = cur[:0]
	}
	for _, l := range strings.Split(a.Body, "\n") {
		t := strings.TrimSpace(l)
		switch {
		case t == "":
			flush()
		case strings.HasPrefix(t, "#"):
			flush()
			heading = plain(strings.TrimLeft(t, "# "))
		case listItem.MatchString(t):
			flush()
			cur = append(cur, listItem.ReplaceAllString(t, ""))
		default:
			cur = append(cur, t)
		}
	}
	flush()
	return out
}

var (
	listItem = regexp.MustCompile(`^([-*+]|\d+[.)])\s+`)
	link     = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
	emphasis = strings.NewReplacer("**", "", "__", "", "`", "", "*", "")
	spaces   = regexp.MustCompile(`\s+`)
)

// plain removes inline Markdown (links keep their text, emphasis and code
// marks go) and collapses white space.
func plain(s string) string {
	s = link.ReplaceAllString(s, "$1")
	s = emphasis.Replace(s)
	return strings.TrimSpace(spaces.ReplaceAllString(s, " "))
}

// sentenceEnd is the end of a sentence: . ! or ? followed by white space.
var sentenceEnd = regexp.MustCompile(`[.!?]["')]?\s+`)

// Sentences splits plain text into sentences at ".", "!" or "?" followed by
// white space, so "$4.99" stays whole.
func Sentences(text string) []string {
	var out []string
	rest := strings.TrimSpace(text)
	for rest != "" {
		loc := sentenceEnd.FindStringIndex(rest)
		if loc == nil {
			out = append(out, rest)
			break
		}
		if s := strings.TrimSpace(rest[:loc[1]]); s != "" {
			out = append(out, s)
		}
		rest = strings.TrimSpace(rest[loc[1]:])
	}
	return out
}
