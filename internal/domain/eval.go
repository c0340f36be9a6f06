package domain

import (
	"errors"
	"fmt"

	"go.yaml.in/yaml/v3"
)

// RetrievalCase is one question of an evaluation set with the articles
// that answer it (any one of them counts as a hit) and, in the caller
// question sets (eval/heldout.yaml, eval/tuning.yaml), the intent it
// should be classified as.
type RetrievalCase struct {
	Question string
	Expect   []string // article ids; empty only when Intent is set
	Intent   string   // "" in the retrieval-only sets
	Line     int
}

// RetrievalEval reads the domain's retrieval evaluation set
// (eval/retrieval.yaml). It fails with an error wrapping fs.ErrNotExist when
// the domain has none, and with an *Error when a case is malformed or names
// an article the domain does not have.
func (d *Domain) RetrievalEval() ([]RetrievalCase, error) {
	return d.RetrievalEvalFile(RetrievalEvalFile)
}

// RetrievalEvalFile reads a retrieval evaluation set in the format of
// eval/retrieval.yaml from the file name inside the domain, e.g.
// SpokenRetrievalEvalFile; it fails as RetrievalEval does.
func (d *Domain) RetrievalEvalFile(name string) ([]RetrievalCase, error) {
	file := d.file(name)
	data, err := d.readText(name)
	if err != nil {
		if _, ok := errors.AsType[*Error](err); ok {
			return nil, err
		}
		return nil, fmt.Errorf("domain %s: retrieval eval: %w", d.Name, err)
	}
	return d.ParseRetrievalEval(file, data)
}

// ParseRetrievalEval parses a set of questions in the format of
// eval/retrieval.yaml from data, read from file (named in its errors):
// a caller question set kept outside the domain folder, say. It fails
// with an *Error when a case is malformed, names an intent or an article
// the domain does not have, or there are no questions.
func (d *Domain) ParseRetrievalEval(file string, data []byte) ([]RetrievalCase, error) {
	root, err := parseYAML(file, data)
	if err != nil {
		return nil, err
	}
	ids := make(map[string]bool, len(d.Articles))
	for _, a := range d.Articles {
		ids[a.ID] = true
	}
	intents := map[string]bool{OutOfScope: true}
	for _, in := range d.Intents {
		intents[in.Name] = true
	}
	var cases []RetrievalCase
	err = eachField(file, root, func(key string, k, v *yaml.Node) error {
		if key != "questions" {
			return &Error{File: file, Line: k.Line, Msg: fmt.Sprintf("unknown field %q (want questions)", key)}
		}
		if v.Kind != yaml.SequenceNode {
			return &Error{File: file, Line: v.Line, Msg: "questions must be a list"}
		}
		for _, item := range v.Content {
			c, err := parseCase(file, item, ids, intents)
			if err != nil {
				return err
			}
			cases = append(cases, c)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(cases) == 0 {
		return nil, &Error{File: file, Line: root.Line, Msg: "no questions"}
	}
	return cases, nil
}

func parseCase(file string, n *yaml.Node, ids, intents map[string]bool) (RetrievalCase, error) {
	c := RetrievalCase{Line: n.Line}
	if n.Kind != yaml.MappingNode {
		return c, &Error{File: file, Line: n.Line, Msg: "a question must be a mapping with question and expect"}
	}
	err := eachField(file, n, func(key string, k, v *yaml.Node) error {
		switch key {
		case "question":
			s, err := scalar(file, v, "question")
			c.Question = s
			return err
		case "expect":
			if v.Kind != yaml.SequenceNode {
				return &Error{File: file, Line: v.Line, Msg: "expect must be a list of article ids"}
			}
			for _, e := range v.Content {
				s, err := scalar(file, e, "article id")
				if err != nil {
					return err
				}
				if !ids[s] {
					return &Error{File: file, Line: e.Line, Msg: fmt.Sprintf("unknown article %q", s)}
				}
				c.Expect = append(c.Expect, s)
			}
			return nil
		case "intent":
			s, err := scalar(file, v, "intent")
			if err == nil && !intents[s] {
				err = &Error{File: file, Line: v.Line, Msg: fmt.Sprintf("unknown intent %q", s)}
			}
			c.Intent = s
			return err
		default:
			return &Error{File: file, Line: k.Line, Msg: fmt.Sprintf("unknown field %q (want question, expect, intent)", key)}
		}
	})
	if err != nil {
		return c, err
	}
	if c.Question == "" || (len(c.Expect) == 0 && c.Intent == "") {
		return c, &Error{File: file, Line: n.Line, Msg: "a case needs a question and at least one expected article (or, in a caller question set, its intent)"}
	}
	return c, nil
}
