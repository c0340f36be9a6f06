package domain

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"regexp"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// intentName is the form of an intent name: clients match on it.
var intentName = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

func (d *Domain) loadIntents() error {
	file := d.file(IntentsFile)
	data, err := d.readText(IntentsFile)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return &Error{File: file, Msg: "missing: a domain needs an intents file"}
		}
		return readError(err, "intents")
	}
	root, err := parseYAML(file, data)
	if err != nil {
		return err
	}
	var sawIntents bool
	err = eachField(file, root, func(key string, k, v *yaml.Node) error {
		switch key {
		case "fallback":
			s, err := scalar(file, v, "fallback")
			d.Fallback = s
			return err
		case "intents":
			sawIntents = true
			return d.parseIntentList(file, v)
		default:
			return &Error{File: file, Line: k.Line, Msg: fmt.Sprintf("unknown field %q (want fallback, intents)", key)}
		}
	})
	if err != nil {
		return err
	}
	if !sawIntents || len(d.Intents) == 0 {
		return &Error{File: file, Line: root.Line, Msg: "no intents: the file needs an \"intents\" list"}
	}
	trained := 0
	for _, in := range d.Intents {
		if len(in.Examples) > 0 {
			trained++
		}
	}
	// The classifier tells intents apart: it needs two to train
	// (intent.ErrTooFewIntents), one of which may be out_of_scope with
	// examples of off-topic requests.
	if trained < 2 {
		some := "no intent has"
		if trained == 1 {
			some = "only one intent has"
		}
		return &Error{File: file, Line: root.Line, Msg: some + " examples: the classifier needs at least two intents with examples (out_of_scope with off-topic ones may be one)"}
	}
	return nil
}

func (d *Domain) parseIntentList(file string, list *yaml.Node) error {
	if list.Kind != yaml.SequenceNode {
		return &Error{File: file, Line: list.Line, Msg: "intents must be a list"}
	}
	lines := make(map[string]int)
	examples := make(map[string]int) // normalised example -> line
	for _, item := range list.Content {
		in, links, err := parseIntent(file, item, examples)
		if err != nil {
			return err
		}
		d.links = append(d.links, links...)
		if prev, dup := lines[in.Name]; dup {
			return &Error{File: file, Line: item.Line, Msg: fmt.Sprintf("intent %q is already defined at line %d", in.Name, prev)}
		}
		lines[in.Name] = item.Line
		d.Intents = append(d.Intents, in)
	}
	return nil
}

// parseIntent parses one intent. examples holds the examples seen so far:
// an example listed twice is an error, because it would be contradictory
// in two intents and would inflate cross-validated accuracy in one.
// It also returns the intent's "articles" entries, which can only be
// checked once the articles are loaded.
func parseIntent(file string, n *yaml.Node, examples map[string]int) (Intent, []articleLink, error) {
	var (
		in    Intent
		links []articleLink
	)
	if n.Kind != yaml.MappingNode {
		return in, nil, &Error{File: file, Line: n.Line, Msg: "an intent must be a mapping with name, examples, response and articles"}
	}
	err := eachField(file, n, func(key string, k, v *yaml.Node) error {
		var err error
		switch key {
		case "name":
			in.Name, err = scalar(file, v, "name")
		case "response":
			in.Response, err = scalar(file, v, "response")
		case "examples":
			err = eachText(file, v, "examples must be a list of phrases", "example", func(line int, s string) error {
				if s == "" {
					return &Error{File: file, Line: line, Msg: "empty example"}
				}
				norm := exampleWords(s)
				if norm == "" {
					return &Error{File: file, Line: line, Msg: fmt.Sprintf("example %q has no words", s)}
				}
				if prev, dup := examples[norm]; dup {
					return &Error{File: file, Line: line, Msg: fmt.Sprintf("example %q is already listed at line %d", s, prev)}
				}
				examples[norm] = line
				in.Examples = append(in.Examples, s)
				return nil
			})
		case "grounded":
			// A null (empty or ~) decodes into false without an error:
			// refused, since the default is true.
			var g bool
			if v.Kind != yaml.ScalarNode || v.Tag == "!!null" || v.Decode(&g) != nil {
				return &Error{File: file, Line: v.Line, Msg: "grounded must be true or false"}
			}
			in.Ungrounded = !g
		case "articles":
			err = eachText(file, v, "articles must be a list of article ids", "article id", func(line int, id string) error {
				if id == "" {
					return &Error{File: file, Line: line, Msg: "empty article id"}
				}
				if slices.Contains(in.Articles, id) {
					return &Error{File: file, Line: line, Msg: fmt.Sprintf("article %q is listed twice", id)}
				}
				in.Articles = append(in.Articles, id)
				links = append(links, articleLink{article: id, line: line})
				return nil
			})
		default:
			err = &Error{File: file, Line: k.Line, Msg: fmt.Sprintf("unknown field %q (want name, examples, response, articles, grounded)", key)}
		}
		return err
	})
	if err != nil {
		return in, nil, err
	}
	switch {
	case in.Name == "":
		return in, nil, &Error{File: file, Line: n.Line, Msg: "intent without a name"}
	case !intentName.MatchString(in.Name):
		return in, nil, &Error{File: file, Line: n.Line, Msg: fmt.Sprintf("intent name %q: use lower case letters, digits and underscores", in.Name)}
	case in.Ungrounded && len(in.Articles) > 0:
		return in, nil, &Error{File: file, Line: n.Line, Msg: fmt.Sprintf("intent %q is not grounded but lists articles", in.Name)}
	case len(in.Examples) == 0 && in.Name != OutOfScope:
		// Only out_of_scope may go without examples: it is also what the
		// classifier answers when nothing fits.
		return in, nil, &Error{File: file, Line: n.Line, Msg: fmt.Sprintf("intent %q has no examples", in.Name)}
	}
	for i := range links {
		links[i].intent = in.Name
	}
	return in, links, nil
}

// exampleWords is an example as the intent classifier reads it: its
// folded words, so "Where's my order?" and "wheres my order" are one
// example.
func exampleWords(s string) string {
	var ws []string
	for _, f := range Words(s) {
		if w := Fold(f); w != "" {
			ws = append(ws, w)
		}
	}
	return strings.Join(ws, " ")
}

// Words splits text into words as the intent classifier reads it: lower
// case, runs of letters and digits with the apostrophes inside them
// ("where's"), everything else a separator.
func Words(text string) []string {
	return strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '\'' && r != '’'
	})
}

// Fold drops a word's apostrophes: "where's" and "wheres" are one word
// to the classifier (callers and recognisers spell it both ways). A word
// of apostrophes alone folds to "".
func Fold(w string) string { return apostrophes.Replace(w) }

// apostrophes is built once: the classifier folds every word it reads.
var apostrophes = strings.NewReplacer("'", "", "’", "")

// parseYAML parses one YAML document and returns its top-level mapping. A
// second document (after a "---" line) is refused: yaml.Unmarshal would
// read the first alone and drop the rest without a word.
func parseYAML(file string, data []byte) (*yaml.Node, error) {
	// yaml.v3 names no line for a byte that is not UTF-8 (a Latin-1 "é"
	// in a 1,000-line file), and reads UTF-16 (which the docs do not
	// allow) as a document without the fields it has.
	if bad := invalidUTF8(data); bad >= 0 {
		return nil, &Error{File: file, Line: bytes.Count(data[:bad], []byte("\n")) + 1, Msg: "not UTF-8 text: save the file as UTF-8"}
	}
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil && !errors.Is(err, io.EOF) {
		return nil, yamlError(file, err)
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return nil, &Error{File: file, Msg: "empty file"}
	}
	// An empty document after a trailing --- (or only comments after it)
	// holds nothing to drop.
	var next yaml.Node
	switch err := dec.Decode(&next); {
	case err == nil && len(next.Content) > 0 && next.Content[0].Tag != "!!null":
		return nil, &Error{File: file, Line: next.Line, Msg: "a second YAML document (after ---): put everything in one"}
	case err != nil && !errors.Is(err, io.EOF):
		return nil, yamlError(file, err)
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return nil, &Error{File: file, Line: root.Line, Msg: "the top level must be a mapping"}
	}
	return root, nil
}

// invalidUTF8 returns the offset of the first byte of data that is not
// UTF-8, or -1.
func invalidUTF8(data []byte) int {
	for i := 0; i < len(data); {
		r, n := utf8.DecodeRune(data[i:])
		if r == utf8.RuneError && n == 1 {
			return i
		}
		i += n
	}
	return -1
}

// yamlLine finds the line in yaml.v3's syntax error messages
// ("yaml: line 7: ...") so the error keeps the documented file:line form.
var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

func yamlError(file string, err error) error {
	msg := err.Error()
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		var line int
		fmt.Sscan(m[1], &line)
		return &Error{File: file, Line: line, Msg: "invalid YAML: " + m[2]}
	}
	return &Error{File: file, Msg: "invalid YAML: " + strings.TrimPrefix(msg, "yaml: ")}
}

// eachField calls fn for each key of mapping n, rejecting duplicate keys.
func eachField(file string, n *yaml.Node, fn func(key string, k, v *yaml.Node) error) error {
	seen := make(map[string]bool)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			return &Error{File: file, Line: k.Line, Msg: "keys must be plain names"}
		}
		if seen[k.Value] {
			return &Error{File: file, Line: k.Line, Msg: fmt.Sprintf("duplicate field %q", k.Value)}
		}
		seen[k.Value] = true
		if err := fn(k.Value, k, v); err != nil {
			return err
		}
	}
	return nil
}

// scalar returns the trimmed text of a scalar node.
// eachText calls fn with the line and text of each item of the list n;
// notList is the error when n is not a list, what names an item in the
// error when one is not text.
func eachText(file string, n *yaml.Node, notList, what string, fn func(line int, s string) error) error {
	if n.Kind != yaml.SequenceNode {
		return &Error{File: file, Line: n.Line, Msg: notList}
	}
	for _, e := range n.Content {
		s, err := scalar(file, e, what)
		if err != nil {
			return err
		}
		if err := fn(e.Line, s); err != nil {
			return err
		}
	}
	return nil
}

func scalar(file string, n *yaml.Node, what string) (string, error) {
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if n.Kind != yaml.ScalarNode {
		return "", &Error{File: file, Line: n.Line, Msg: what + " must be text"}
	}
	if n.Tag == "!!null" {
		return "", nil
	}
	return strings.TrimSpace(n.Value), nil
}
