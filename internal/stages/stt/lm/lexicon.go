package lm

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"os"
	"slices"
	"strings"
	"unicode"
)

// DefaultDictionary is the general en-us pronunciation dictionary of
// Debian's pocketsphinx-en-us, the embedded recogniser's.
const DefaultDictionary = "/usr/share/pocketsphinx/model/en-us/cmudict-en-us.dict"

// Lexicon gives the pronunciation of a word: the recogniser's dictionary
// (CMUdict's format) with a domain's own entries over it. The intent
// classifier uses it to compare what was said by its sounds as well as by
// its letters ("land class" and "lamp last" share more phones than
// letters). Words are looked up in lower case, with their apostrophes
// ("i'd" is not "id") or without them ("wheres" finds "where's").
//
// Debian's dictionary (3.1 MiB, 126,000 words with their first
// pronunciations) is kept as the file's text and a sorted index of 32-bit
// line offsets, about 4 MiB in all, rather than as a map, which would cost
// several times that; a lookup is a binary search.
type Lexicon struct {
	text string
	// lines are the offsets of the words of the first pronunciation of
	// each word, sorted by word.
	lines []uint32
	// folded maps a word with an apostrophe, written without it, to its
	// phones (the domain's over the dictionary's); extra holds the
	// domain's entries as written, which win.
	folded, extra map[string]string
}

// ReadLexicon reads the dictionary at path, with a domain's pronunciations
// (ParsePronunciations; nil for none) over it. Only a word's first
// pronunciation is kept: alternates ("read(2)") are skipped.
func ReadLexicon(path string, domain []Pronunciation) (*Lexicon, error) {
	if st, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("lm: lexicon: %w", err)
	} else if st.Size() > math.MaxUint32 {
		return nil, fmt.Errorf("lm: lexicon %s: %d bytes, more than an index of 32-bit offsets holds", path, st.Size())
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("lm: lexicon: %w", err)
	}
	return parseLexicon(string(data), domain), nil
}

// parseLexicon is ReadLexicon of a dictionary's text; it accepts any.
func parseLexicon(dict string, domain []Pronunciation) *Lexicon {
	l := &Lexicon{text: strings.TrimPrefix(dict, bom), folded: map[string]string{}, extra: map[string]string{}}
	l.index()
	l.addDomain(domain)
	return l
}

// index lists the dictionary's first pronunciations in l.lines, sorted by
// word, and its words with apostrophes in l.folded.
func (l *Lexicon) index() {
	for off := 0; off < len(l.text); {
		end := strings.IndexByte(l.text[off:], '\n')
		if end < 0 {
			end = len(l.text)
		} else {
			end += off
		}
		line := l.text[off:end]
		if w, ph, ok := entry(line); ok && !strings.ContainsRune(w, '(') {
			// The offset of the word itself, past any indentation.
			indent := len(line) - len(strings.TrimLeftFunc(line, unicode.IsSpace))
			l.lines = append(l.lines, uint32(off+indent))
			if f := fold(w); f != w {
				if _, dup := l.folded[f]; !dup {
					l.folded[f] = ph
				}
			}
		}
		off = end + 1
	}
	// Debian's dictionary is sorted already; a hand-made one may not be.
	// Stable, so that of a word listed twice the first is found.
	byWord := func(a, b uint32) int { return cmp.Compare(l.word(a), l.word(b)) }
	if !slices.IsSortedFunc(l.lines, byWord) {
		slices.SortStableFunc(l.lines, byWord)
	}
}

// addDomain adds a domain's pronunciations, which win over the
// dictionary's, as written and folded; of a word listed twice the first
// counts.
func (l *Lexicon) addDomain(prons []Pronunciation) {
	folded := map[string]string{}
	for _, p := range prons {
		if strings.ContainsRune(p.Word, '(') {
			continue
		}
		if _, dup := l.extra[p.Word]; !dup {
			l.extra[p.Word] = p.Phones
		}
		if _, dup := folded[fold(p.Word)]; !dup {
			folded[fold(p.Word)] = p.Phones
		}
	}
	maps.Copy(l.folded, folded)
}

// bom is the byte order mark an editor may put at the start of a
// dictionary.
const bom = "\ufeff"

// Phones returns word's phones separated by single spaces ("L AE M P"),
// or false when the lexicon does not know it. word is in lower case, as
// said ("i'm", "we'll") or without its apostrophes ("wheres"): the form
// as said is found first, so "we'll" is not taken for "well".
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

// Len is the number of dictionary words the lexicon indexes (first
// pronunciations), a measure of its size.
func (l *Lexicon) Len() int { return len(l.lines) }

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
	if strings.Contains(phones, "  ") || strings.ContainsFunc(phones, func(r rune) bool { return r != ' ' && unicode.IsSpace(r) }) {
		phones = strings.Join(strings.Fields(phones), " ")
	}
	return word, phones, true
}

// fold writes w as the intent classifier's tokens do: lower case, without
// apostrophes.
func fold(w string) string {
	if strings.ContainsAny(w, "'’") || strings.ToLower(w) != w {
		return unapostrophe.Replace(strings.ToLower(w))
	}
	return w
}

// unapostrophe is built once: fold runs on every dictionary word with an
// apostrophe at start-up.
var unapostrophe = strings.NewReplacer("'", "", "’", "")
