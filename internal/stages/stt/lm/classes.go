package lm

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Classes are word classes of a class-based model: class name to member
// words ("product": lamp, sofa, ...). A class-based model counts a member
// word as its class, so what the corpus says about one product ("i want to
// return a jacket") it says about every product ("... a lamp"): the model
// reaches beyond the corpus's own sentences. A word is in at most one
// class.
type Classes map[string][]string

// ClassLinePrefix starts a corpus line that declares a class rather than
// being a sentence: "@class product lamp sofa rug". See ParseCorpus.
const ClassLinePrefix = "@class "

// ClassLine returns the corpus line that declares class name with members.
func ClassLine(name string, members []string) string {
	return ClassLinePrefix + name + " " + strings.Join(members, " ")
}

// ParseCorpus splits corpus lines into sentences (see Sentences) and class
// declarations (lines starting with ClassLinePrefix: a name and its member
// words). A domain passes its classes to the recogniser this way, with its
// sentences.
func ParseCorpus(lines []string) ([][]string, Classes, error) {
	var sents [][]string
	classes := Classes{}
	for _, l := range lines {
		rest, ok := strings.CutPrefix(l, ClassLinePrefix)
		if !ok {
			sents = append(sents, Sentences(l)...)
			continue
		}
		f := strings.Fields(rest)
		if len(f) < 2 {
			return nil, nil, fmt.Errorf("lm: class line %q: want a name and at least one word", l)
		}
		for _, w := range f[1:] {
			if ws := Words(w); len(ws) != 1 || ws[0] != w {
				return nil, nil, fmt.Errorf("lm: class %s: %q is not one lower-case word", f[0], w)
			}
		}
		classes[f[0]] = append(classes[f[0]], f[1:]...)
	}
	return sents, classes, nil
}

// classToken is how the model writes a class internally; Words never
// yields a "[", so it cannot be a word.
func classToken(name string) string { return "[" + name + "]" }

// classInfo is a built model's view of its classes.
type classInfo struct {
	of      map[string]string   // member word -> class token
	members map[string][]string // class token -> members, sorted
	prob    map[string]float64  // member word -> P(word | class)
}

// index checks classes and maps member words to class tokens.
func (c Classes) index() (map[string]string, map[string][]string, error) {
	of := map[string]string{}
	members := map[string][]string{}
	for _, name := range slices.Sorted(maps.Keys(c)) {
		tok := classToken(name)
		for _, w := range c[name] {
			if w == "" || strings.ContainsAny(w, " \t\n[]") || w == BOS || w == EOS {
				return nil, nil, fmt.Errorf("lm: class %s: invalid word %q", name, w)
			}
			if prev, ok := of[w]; ok && prev != tok {
				return nil, nil, fmt.Errorf("lm: %q is in classes %s and %s", w, prev, tok)
			}
			if _, ok := of[w]; !ok {
				members[tok] = append(members[tok], w)
			}
			of[w] = tok
		}
		slices.Sort(members[tok])
	}
	return of, members, nil
}

// BuildClasses estimates a class-based model: every member word of a class
// in sentences is counted as its class, the n-gram model is estimated over
// words and classes as Build does, and a member's probability in a context
// is its class's times P(word | class) = (c(word)+1) / (c(class)+|class|),
// its corpus count smoothed so that members the corpus never says still
// get their share. WriteARPA writes the model expanded to words, so the
// recogniser needs no class support. With no classes it is Build.
func BuildClasses(sentences [][]string, order int, classes Classes) (*Model, error) {
	if len(classes) == 0 {
		return Build(sentences, order)
	}
	of, members, err := classes.index()
	if err != nil {
		return nil, err
	}
	counts := map[string]int{}
	classCounts := map[string]int{}
	mapped := make([][]string, len(sentences))
	for i, s := range sentences {
		m := make([]string, len(s))
		for j, w := range s {
			m[j] = w
			if tok, ok := of[w]; ok {
				m[j] = tok
				counts[w]++
				classCounts[tok]++
			}
		}
		mapped[i] = m
	}
	model, err := Build(mapped, order)
	if err != nil {
		return nil, err
	}
	prob := make(map[string]float64, len(of))
	for w, tok := range of {
		prob[w] = float64(counts[w]+1) / float64(classCounts[tok]+len(members[tok]))
	}
	model.classes = &classInfo{of: of, members: members, prob: prob}
	// Every class is in the vocabulary, said or not.
	for tok := range members {
		if !slices.Contains(model.vocab, tok) {
			model.vocab = append(model.vocab, tok)
		}
	}
	slices.Sort(model.vocab)
	return model, nil
}

// expand returns the words a token stands for: a class's members, or the
// word itself.
func (m *Model) expand(tok string) []string {
	if m.classes != nil {
		if ms, ok := m.classes.members[tok]; ok {
			return ms
		}
	}
	return []string{tok}
}

// wordProb is P(word | its class) for a member word, 1 for any other.
func (m *Model) wordProb(w string) float64 {
	if m.classes != nil {
		if p, ok := m.classes.prob[w]; ok {
			return p
		}
	}
	return 1
}

// token returns the class token of a member word, or the word.
func (m *Model) token(w string) string {
	if m.classes != nil {
		if tok, ok := m.classes.of[w]; ok {
			return tok
		}
	}
	return w
}
