package domain

import (
	"bytes"
	"errors"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
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

// parseArticle checks an article file: UTF-8, an optional front matter
// block, a "# Title" as its first non-blank line after it, and some text
// after the title.
func parseArticle(file, name string, data []byte) (Article, error) {
	a := Article{ID: strings.TrimSuffix(path.Base(name), ".md"), Path: name}
	if bad := invalidUTF8(data); bad >= 0 {
		return a, &Error{File: file, Line: bytes.Count(data[:bad], []byte("\n")) + 1, Msg: "not UTF-8 text: save the file as UTF-8"}
	}
	data = bytes.TrimPrefix(data, []byte("\ufeff"))
	lines := strings.Split(strings.ReplaceAll(string(data), "\r\n", "\n"), "\n")
	// Comments go first (docs/domain.md): an editor's note above the
	// front matter, or in it, does not hide it.
	if err := stripComments(file, lines); err != nil {
		return a, err
	}
	body, err := a.parseFrontMatter(file, lines)
	if err != nil {
		return a, err
	}
	titleLine := -1
	for i := body; i < len(lines); i++ {
		l := lines[i]
		if strings.TrimSpace(l) == "" {
			continue
		}
		// The title is checked as it will be used, without markup: "# **"
		// is no title.
		if !strings.HasPrefix(l, "# ") || headingText(l) == "" {
			return a, &Error{File: file, Line: i + 1, Msg: `an article must start with its title as "# Title"`}
		}
		titleLine = i
		break
	}
	if titleLine < 0 {
		return a, &Error{File: file, Line: 1, Msg: "empty article"}
	}
	a.Title = headingText(lines[titleLine])
	a.Body = strings.TrimSpace(strings.Join(lines[titleLine+1:], "\n"))
	if len(a.Paragraphs()) == 0 {
		return a, &Error{File: file, Line: titleLine + 1, Msg: "empty article: no text after the title"}
	}
	return a, nil
}

// frontMatterFence opens and closes an article's front matter.
const frontMatterFence = "---"

// parseFrontMatter reads the front matter that may open an article: YAML
// between two "---" lines, before the title, with the fields keywords (a
// list of words and phrases) and classes (a list of class names). It returns the index of the first line
// after it (0 when there is none).
func (a *Article) parseFrontMatter(file string, lines []string) (int, error) {
	first := slices.IndexFunc(lines, func(l string) bool { return strings.TrimSpace(l) != "" })
	if first < 0 || strings.TrimSpace(lines[first]) != frontMatterFence {
		return 0, nil
	}
	end := slices.IndexFunc(lines[first+1:], func(l string) bool { return strings.TrimSpace(l) == frontMatterFence })
	if end < 0 {
		return 0, &Error{File: file, Line: first + 1, Msg: `front matter is not closed (want a "---" line before the title)`}
	}
	end += first + 1
	block := strings.Join(lines[first+1:end], "\n")
	// A block of blank and comment lines ("# keywords: [swap]") holds
	// nothing; YAML would read it as an empty document.
	if !slices.ContainsFunc(lines[first+1:end], func(l string) bool {
		t := strings.TrimSpace(l)
		return t != "" && !strings.HasPrefix(t, "#")
	}) {
		return end + 1, nil
	}
	// Errors name lines of the article file, not of the block.
	shift := func(err error) error {
		var e *Error
		if errors.As(err, &e) && e.Line > 0 {
			e.Line += first + 1
		}
		return err
	}
	root, err := parseYAML(file, []byte(block))
	if err != nil {
		return 0, shift(err)
	}
	err = eachField(file, root, func(key string, k, v *yaml.Node) error {
		switch key {
		case "keywords":
			return eachText(file, v, "keywords must be a list of words and phrases", "a keyword", func(line int, w string) error {
				if w == "" {
					return &Error{File: file, Line: line, Msg: "empty keyword"}
				}
				a.Keywords = append(a.Keywords, w)
				return nil
			})
		case "classes":
			return eachText(file, v, "classes must be a list of class names", "a class name", func(line int, c string) error {
				if !intentName.MatchString(c) {
					return &Error{File: file, Line: line, Msg: fmt.Sprintf("class name %q: want lower-case letters, digits and underscores, as in classes/NAME.txt", c)}
				}
				a.Classes = append(a.Classes, c)
				return nil
			})
		default:
			return &Error{File: file, Line: k.Line, Msg: fmt.Sprintf("unknown front matter field %q (want keywords or classes)", key)}
		}
	})
	if err != nil {
		return 0, shift(err)
	}
	return end + 1, nil
}

// Paragraphs splits the article body into paragraphs at blank lines and
// headings; each list item is a paragraph of its own. Markdown markup is
// removed.
func (a Article) Paragraphs() []Paragraph {
	var (
		out     []Paragraph
		heading string
		cur     []string
		item    bool // cur is a list item
	)
	flush := func() {
		if t := plain(strings.Join(cur, " ")); t != "" {
			out = append(out, Paragraph{Heading: heading, Text: t})
		}
		cur = cur[:0]
		item = false
	}
	for _, l := range strings.Split(a.Body, "\n") {
		t := strings.TrimSpace(l)
		switch {
		case t == "":
			flush()
		case headingLine.MatchString(t):
			flush()
			heading = headingText(t)
		case len(cur) > 0 && !item && setextUnderline.MatchString(t):
			// "Section" over "-------" or "=======" is a heading.
			heading = plain(strings.Join(cur, " "))
			cur = cur[:0]
		case thematicBreak.MatchString(t):
			// "---", "***", "- - -": a rule, which says nothing.
			flush()
		case listItem.MatchString(t):
			flush()
			item = true
			cur = append(cur, listItem.ReplaceAllString(t, ""))
		default:
			cur = append(cur, t)
		}
	}
	flush()
	return out
}

var (
	// headingLine is a Markdown heading: one to six #, then a space or
	// the line's end ("#100234. Quote it" is text).
	headingLine = regexp.MustCompile(`^#{1,6}(\s|$)`)
	// closingHashes is an ATX heading's optional closing sequence
	// ("## Returns ##"), which is not part of its text.
	closingHashes   = regexp.MustCompile(`(^|\s)#+\s*$`)
	setextUnderline = regexp.MustCompile(`^(=+|-+)$`)
	thematicBreak   = regexp.MustCompile(`^(([-][ \t]*){3,}|([*][ \t]*){3,}|([_][ \t]*){3,})$`)
	listItem        = regexp.MustCompile(`^([-*+]|\d+[.)])\s+`)
	link            = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
	emphasis        = strings.NewReplacer("**", "", "__", "", "`", "", "*", "")
	spaces          = regexp.MustCompile(`\s+`)
)

// plain removes inline Markdown (links keep their text, emphasis and code
// marks go) and collapses white space.
func plain(s string) string {
	s = link.ReplaceAllString(s, "$1")
	s = emphasis.Replace(s)
	return strings.TrimSpace(spaces.ReplaceAllString(s, " "))
}

// headingText is the text of an ATX heading line ("## Returns ##" is
// "Returns"), without markup.
func headingText(line string) string {
	s := strings.TrimLeft(strings.TrimSpace(line), "#")
	return plain(closingHashes.ReplaceAllString(s, ""))
}

// commentOpen and commentClose delimit an HTML comment.
const commentOpen, commentClose = "<!--", "-->"

// stripComments blanks the HTML comments of lines in place (an
// editor's note is neither indexed, quoted nor spoken), keeping the lines
// so errors still name them. A comment left open is an error naming its
// line.
func stripComments(file string, lines []string) error {
	open := -1 // line of the comment being read
	for i := range lines {
		l, kept := lines[i], ""
		for l != "" {
			if open < 0 {
				j := strings.Index(l, commentOpen)
				if j < 0 {
					kept += l
					break
				}
				// A "<!--" in a code span ("type `<!--`") is text.
				if k := strings.IndexByte(l[:j], '`'); k >= 0 {
					end := codeSpanEnd(l, k)
					kept += l[:end]
					l = l[end:]
					continue
				}
				kept += l[:j]
				l = l[j+len(commentOpen):]
				// "<!-->" and "<!--->" are whole, empty comments
				// (CommonMark, HTML).
				if rest, ok := strings.CutPrefix(l, ">"); ok {
					l = rest
					continue
				}
				if rest, ok := strings.CutPrefix(l, "->"); ok {
					l = rest
					continue
				}
				open = i
				continue
			}
			j := strings.Index(l, commentClose)
			if j < 0 {
				break
			}
			l = l[j+len(commentClose):]
			open = -1
		}
		lines[i] = kept
	}
	if open >= 0 {
		return &Error{File: file, Line: open + 1, Msg: `HTML comment not closed (want "-->")`}
	}
	return nil
}

// codeSpanEnd is the end in l of the code span whose opening backticks
// start at k: past its closing run of as many backticks, or, with none
// on the line, past the opening run, which is then text.
func codeSpanEnd(l string, k int) int {
	n := k
	for n < len(l) && l[n] == '`' {
		n++
	}
	run := l[k:n]
	for i := n; i < len(l); {
		j := strings.Index(l[i:], run)
		if j < 0 {
			break
		}
		j += i
		e := j + len(run)
		if e == len(l) || l[e] != '`' {
			return e
		}
		for e < len(l) && l[e] == '`' {
			e++
		}
		i = e
	}
	return n
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
