package lm

import (
	"bufio"
	"bytes"
	"cmp"
	"fmt"
	"os"
	"slices"
	"strings"
)

// DefaultDictionary is the general en-us pronunciation dictionary of
// Debian's pocketsphinx-en-us, the embedded recogniser's.
const DefaultDictionary = "/usr/share/pocketsphinx/model/en-us/cmudict-en-us.dict"

// Lexicon gives the pronunciation of a word: the recogniser's dictionary
// (CMUdict's format) with a domain's own entries over it. The intent
// classifier uses it to compare what was said by its sounds as well as by
// its letters ("land class" and "lamp last" share more phones than
// letters), so it looks words up as the classifier writes them: lower
// case, apostrophes removed ("wheres" finds "where's").
//
// The dictionary's 135,000 entries are kept as the file's text and a
// sorted index of line offsets (about 4 MB) rather than as a map, which
// would cost several times that; a lookup is a binary search.
type Lexicon struct {
	text string
	// lines are the offsets of the words of the first pronunciation of
	// each word, sorted by word.
	lines []uint32
	// folded maps a word with an apostrophe, written without it, to its
	// phones; extra holds the domain's entries, which win.
	folded, extra map[string]string
}

// ReadLexicon reads the dictionary at path and a domain's pronunciations
// (the same format, with ";" and "#" comment lines; nil for none). Only a
// word's first pronunciation is kept: alternates ("read(2)") are skipped.
func ReadLexicon(path string, domain []byte) (*Lexicon, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("lm: lexicon: %w", err)
	}
	if len(data) >= 1<<32 {
		return nil, fmt.Errorf("lm: lexicon %s: too large", path)
	}
	l := &Lexicon{text: string(data), folded: map[string]string{}, extra: map[string]string{}}
	for off := 0; off < len(l.text); {
		end := strings.IndexByte(l.text[off:], '\n')
		if end < 0 {
			end = len(l.text)
		} else {
			end += off
		}
		if w, ph, ok := entry(l.text[off:end]); ok && !strings.ContainsRune(w, '(') {
			// The offset of the word itself, past any indentation.
			l.lines = append(l.lines, uint32(off+strings.Index(l.text[off:end], w)))
			if f := fold(w); f != w {
				if _, dup := l.folded[f]; !dup {
					l.folded[f] = ph
				}
			}
		}
		off = end + 1
	}
	// Debian's dictionary is sorted already; a hand-made one may not be.
	byWord := func(a, b uint32) int { return cmp.Compare(l.word(a), l.word(b)) }
	if !slices.IsSortedFunc(l.lines, byWord) {
		slices.SortStableFunc(l.lines, byWord)
	}
	sc := bufio.NewScanner(bytes.NewReader(domain))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, ";") || strings.HasPrefix(line, "#") {
			continue
		}
		if w, ph, ok := entry(line); ok && !strings.ContainsRune(w, '(') {
			if _, dup := l.extra[fold(w)]; !dup {
				l.extra[fold(w)] = ph
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("lm: lexicon: domain pronunciations: %w", err)
	}
	return l, nil
}

// Phones returns word's phones separated by single spaces ("L AE M P"),
// or false when the lexicon does not know it.
func (l *Lexicon) Phones(word string) (string, bool) {
	if ph, ok := l.extra[word]; ok {
		return ph, true
	}
	if i, ok := slices.BinarySearchFunc(l.lines, word, func(off uint32, w string) int {
		return cmp.Compare(l.word(off), w)
	}); ok {
		_, ph, _ := entry(l.lineAt(l.lines[i]))
		return ph, true
	}
	ph, ok := l.folded[word]
	return ph, ok
}

// Len is the number of words the lexicon knows (a word with an apostrophe
// and a domain word the dictionary also has count once each way).
func (l *Lexicon) Len() int { return len(l.lines) + len(l.extra) }

// lineAt is the line starting at off, without its newline.
func (l *Lexicon) lineAt(off uint32) string {
	s := l.text[off:]
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return s
}

// word is the word at off, which an indexed line has before its phones.
func (l *Lexicon) word(off uint32) string {
	s := l.text[off:]
	return s[:strings.IndexAny(s, " \t")]
}

// entry splits a dictionary line into its word and its phones, which it
// returns separated by single spaces; false for a line with no phones.
// Debian's dictionary separates them with single spaces already, so the
// phones are then a substring of the line, not a copy.
func entry(line string) (word, phones string, ok bool) {
	line = strings.TrimSpace(line)
	i := strings.IndexAny(line, " \t")
	if i <= 0 {
		return "", "", false
	}
	word, phones = line[:i], strings.TrimSpace(line[i+1:])
	if phones == "" {
		return "", "", false
	}
	if strings.Contains(phones, "  ") || strings.ContainsRune(phones, '\t') {
		phones = strings.Join(strings.Fields(phones), " ")
	}
	return word, phones, true
}

// fold writes w as the intent classifier's tokens do: lower case, without
// apostrophes.
func fold(w string) string {
	if strings.ContainsAny(w, "'’") || strings.ToLower(w) != w {
		return strings.NewReplacer("'", "", "’", "").Replace(strings.ToLower(w))
	}
	return w
}
