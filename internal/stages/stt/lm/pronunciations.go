package lm

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
)

// Pronunciation is one entry of a pronunciations file.
type Pronunciation struct {
	Word   string // in lower case
	Phones string // separated by single spaces
	Line   int    // in the file, from 1
}

// ReadPronunciations parses the pronunciations file at path
// (ParsePronunciations).
func ReadPronunciations(path string) ([]Pronunciation, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("lm: pronunciations: %w", err)
	}
	defer f.Close()
	return ParsePronunciations(f, path)
}

// ParsePronunciations parses a file in the dictionary's format: a word and
// its phones (upper-case letters) per line; blank lines and lines starting
// with ";;;" or "#" are skipped. The entries come sorted by word, those of
// one word in the file's order. name names the file in errors. The
// recogniser adds them to its dictionary, and the intent classifier's
// lexicon has them over it.
func ParsePronunciations(r io.Reader, name string) ([]Pronunciation, error) {
	var out []Pronunciation
	sc := bufio.NewScanner(r)
	n := 1
	for ; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, ";;;") || strings.HasPrefix(line, "#") {
			continue
		}
		fs := strings.Fields(line)
		if len(fs) < 2 {
			return nil, fmt.Errorf("lm: pronunciations %s:%d: want a word and its phones", name, n)
		}
		for _, p := range fs[1:] {
			if strings.ToUpper(p) != p || strings.ContainsFunc(p, func(r rune) bool { return r < 'A' || r > 'Z' }) {
				return nil, fmt.Errorf("lm: pronunciations %s:%d: bad phone %q", name, n, p)
			}
		}
		out = append(out, Pronunciation{Word: strings.ToLower(fs[0]), Phones: strings.Join(fs[1:], " "), Line: n})
	}
	if err := sc.Err(); err != nil {
		// A line longer than the scanner's buffer, say: name where.
		return nil, fmt.Errorf("lm: pronunciations %s:%d: %w", name, n, err)
	}
	slices.SortStableFunc(out, func(a, b Pronunciation) int { return strings.Compare(a.Word, b.Word) })
	return out, nil
}
