// Package sentence splits text that arrives in pieces (an LLM's streamed
// answer) into sentences as soon as each one is complete, so speech
// synthesis can start on the first sentence while the rest is still
// being generated.
//
// A sentence ends at '.', '!', '?' or an ellipsis followed by whitespace
// (closing quotes and brackets stay with it), at a run of 。！？ (no
// whitespace needed after them), or at a line break. A
// period does not end a sentence after a title or a Latin abbreviation
// ("Dr.", "e.g."), after a single capital initial ("J. Smith"), or inside
// a number or a name ("3.5", "example.com"); after "etc.", "a.m." and
// the like, and after an ellipsis, it ends one only when the next word
// starts with a capital letter. Text that runs past MaxLen without an end
// is cut at its last comma, semicolon, colon or space, so one long
// sentence cannot hold the first audio back; text with none of them is
// cut at MaxLen, between two characters, once it is 4 times as long. With FirstClause, the first
// piece already ends at the first clause boundary (a comma, semicolon or
// colon and a space) after at least MinFirst bytes: the synthesiser
// analyses a whole piece before its first audio, so a shorter first piece
// is heard sooner.
package sentence

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// DefaultMaxLen is the length in bytes after which a sentence without an
// end is cut.
const DefaultMaxLen = 250

// DefaultMinFirst is the shortest first clause cut with FirstClause.
const DefaultMinFirst = 20

// Sentence is one complete sentence.
type Sentence struct {
	// Text is the sentence, without surrounding whitespace.
	Text string
	// Offset is where Text starts in the concatenation of everything fed.
	Offset int
}

// Splitter splits streamed text into sentences. The zero value is ready
// to use with DefaultMaxLen. It is not safe for concurrent use.
type Splitter struct {
	// MaxLen is the length in bytes after which text without a sentence
	// end is cut; 0 means DefaultMaxLen.
	MaxLen int
	// FirstClause cuts the first piece at its first clause boundary.
	FirstClause bool
	// MinFirst is the shortest first clause, in bytes; 0 means
	// DefaultMinFirst.
	MinFirst int

	buf     string // text not yet returned
	base    int    // offset of buf in everything fed
	emitted bool   // a piece was returned since the last Flush
}

// Feed adds a piece of text and returns the sentences it completed, in
// order (often none).
func (s *Splitter) Feed(delta string) []Sentence {
	s.buf += delta
	return s.split(false)
}

// Flush returns what is left as the final sentences (the text after the
// last sentence end), and resets the splitter.
func (s *Splitter) Flush() []Sentence {
	out := s.split(true)
	s.buf, s.base, s.emitted = "", 0, false
	return out
}

func (s *Splitter) split(final bool) []Sentence {
	var out []Sentence
	for {
		cut, ok := boundary(s.buf, final)
		if s.FirstClause && !s.emitted {
			if c, found := s.firstClause(); found && (!ok || c < cut) {
				cut, ok = c, true
			}
		}
		if !ok && !final {
			cut, ok = s.overlong()
		}
		if !ok {
			if final && strings.TrimSpace(s.buf) != "" {
				cut = len(s.buf)
			} else {
				return out
			}
		}
		out = s.take(out, cut)
		if final && s.buf == "" {
			return out
		}
	}
}

// take moves buf[:cut] out as a sentence (if it holds more than
// whitespace).
func (s *Splitter) take(out []Sentence, cut int) []Sentence {
	text := s.buf[:cut]
	lead := len(text) - len(strings.TrimLeftFunc(text, unicode.IsSpace))
	if t := strings.TrimSpace(text); t != "" {
		out = append(out, Sentence{Text: t, Offset: s.base + lead})
		s.emitted = true
	}
	s.buf = s.buf[cut:]
	s.base += cut
	return out
}

// firstClause finds the end of the first clause of at least MinFirst
// bytes: after a comma, semicolon or colon followed by a space.
func (s *Splitter) firstClause() (int, bool) {
	minLen := s.MinFirst
	if minLen <= 0 {
		minLen = DefaultMinFirst
	}
	start := len(s.buf) - len(strings.TrimLeftFunc(s.buf, unicode.IsSpace))
	for i := start + minLen - 1; i+1 < len(s.buf); i++ {
		if strings.IndexByte(",;:", s.buf[i]) >= 0 && isSpaceByte(s.buf[i+1]) {
			return i + 1, true
		}
	}
	return 0, false
}

// overlong finds a cut in text longer than MaxLen that has no sentence
// end: after the last clause punctuation, else the last space.
func (s *Splitter) overlong() (int, bool) {
	limit := s.MaxLen
	if limit <= 0 {
		limit = DefaultMaxLen
	}
	if len(s.buf) <= limit {
		return 0, false
	}
	head := s.buf[:limit]
	if i := strings.LastIndexAny(head, ",;:"); i > 0 && i+1 < len(s.buf) && isSpaceByte(s.buf[i+1]) {
		return i + 1, true
	}
	if i := strings.LastIndexFunc(head, unicode.IsSpace); i > 0 {
		return i, true
	}
	// No space to cut at (a long URL, text in a script without spaces):
	// wait for one, but not for ever. Past hardLimit times the limit, cut
	// at the limit, between two characters, so that the buffer, its
	// rescans and the engine's input stay bounded.
	if len(s.buf) > hardLimit*limit {
		cut := limit
		for cut > 0 && !utf8.RuneStart(s.buf[cut]) {
			cut--
		}
		if cut == 0 {
			// MaxLen shorter than the first character: cut after it.
			_, cut = utf8.DecodeRuneInString(s.buf)
		}
		return cut, true
	}
	return 0, false
}

// hardLimit is how many times MaxLen text without a space may grow
// before it is cut anyway.
const hardLimit = 4

func isSpaceByte(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// Abbreviations after which a period never ends a sentence, lower case,
// without their final period.
var neverEnd = map[string]bool{
	"mr": true, "mrs": true, "ms": true, "dr": true, "prof": true, "st": true, "mt": true, "jr": true, "sr": true,
	"vs": true, "e.g": true, "i.e": true, "cf": true, "no": true, "nos": true, "approx": true, "fig": true,
	"dept": true, "ave": true, "gen": true, "gov": true, "sgt": true, "capt": true, "rev": true, "est": true,
	"jan": true, "feb": true, "mar": true, "apr": true, "jun": true, "jul": true, "aug": true, "sep": true,
	"sept": true, "oct": true, "nov": true, "dec": true, "tel": true, "ext": true, "ref": true, "vol": true,
}

// Abbreviations that may end a sentence: they do when the next word is
// capitalised.
var maybeEnd = map[string]bool{
	"etc": true, "a.m": true, "p.m": true, "inc": true, "ltd": true, "co": true, "corp": true,
	"u.s": true, "u.k": true, "u.s.a": true, "e.u": true, "min": true, "hr": true, "hrs": true,
}

const closers = "\"')]}»”’」』）"

// boundary returns the end of the first complete sentence in s (after
// its punctuation and closing quotes), or false when there is none yet.
// With final, the end of s counts as whitespace.
func boundary(s string, final bool) (int, bool) {
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == '\n':
			if strings.TrimSpace(s[:i]) != "" {
				return i + 1, true
			}
		case isFullwidthTerminal(r):
			// 。！？ end a sentence with no space after them: the run of
			// stops ("？！", "。。。"), then closing quotes.
			j := skipClosers(s, skipRun(s, i, func(r rune) bool { return isFullwidthTerminal(r) || isTerminal(r) }))
			if j == len(s) && !final {
				return 0, false // a closing quote may follow
			}
			return j, true
		case isTerminal(r):
			j, v := stopAt(s, i, final)
			switch v {
			case endsHere:
				return j, true
			case undecided:
				return 0, false
			}
			i = j // no end: the search goes on after the stop
			continue
		}
		i += size
	}
	return 0, false
}

// verdict is what a stop says of the sentence it may end.
type verdict int

const (
	noEnd     verdict = iota // not a sentence's end
	endsHere                 // the sentence ends after the stop
	undecided                // the next character, not yet here, decides
)

// stopAt reads the run of terminal punctuation at s[i:] and its closing
// quotes: it returns their end and whether they end a sentence.
func stopAt(s string, i int, final bool) (int, verdict) {
	onlyPeriod, ellipsis, periods := true, false, 0
	j := skipRun(s, i, func(r rune) bool {
		if !isTerminal(r) {
			return false
		}
		switch r {
		case '.':
			periods++
		case '…':
			ellipsis = true
		default:
			onlyPeriod = false
		}
		return true
	})
	ellipsis = ellipsis || periods >= 3
	j = skipClosers(s, j)
	if j == len(s) {
		return j, atEnd(final)
	}
	if next, _ := utf8.DecodeRuneInString(s[j:]); !unicode.IsSpace(next) {
		return j, noEnd // "3.5", "e.g.", "example.com", "?!)" inside a word
	}
	if !onlyPeriod && !ellipsis {
		return j, endsHere // '!' or '?'
	}
	word := wordBefore(s, i)
	w := strings.ToLower(word)
	switch {
	case ellipsis || maybeEnd[w]:
		return j, capitalNext(s, j, final)
	case neverEnd[w] || isInitial(word):
		return j, noEnd
	}
	return j, endsHere
}

// atEnd is the verdict of a stop at the end of the text so far.
func atEnd(final bool) verdict {
	if final {
		return endsHere
	}
	return undecided
}

// capitalNext decides a stop that ends a sentence only before a capital
// or a line break (an ellipsis, "etc."): s[j:] starts with whitespace.
func capitalNext(s string, j int, final bool) verdict {
	k := j
	for k < len(s) {
		r, n := utf8.DecodeRuneInString(s[k:])
		if !unicode.IsSpace(r) {
			break
		}
		if r == '\n' {
			return endsHere
		}
		k += n
	}
	if k == len(s) {
		return atEnd(final)
	}
	if r, _ := utf8.DecodeRuneInString(s[k:]); unicode.IsUpper(r) {
		return endsHere
	}
	return noEnd
}

// skipRun returns the end of the run of runes from s[i:] that in accepts.
func skipRun(s string, i int, in func(rune) bool) int {
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		if !in(r) {
			break
		}
		i += n
	}
	return i
}

// skipClosers returns the end of the closing quotes and brackets at s[j:].
func skipClosers(s string, j int) int {
	for j < len(s) && hasCloserAt(s, j) {
		_, n := utf8.DecodeRuneInString(s[j:])
		j += n
	}
	return j
}

func isTerminal(r rune) bool { return r == '.' || r == '!' || r == '?' || r == '…' }

func isFullwidthTerminal(r rune) bool { return r == '。' || r == '！' || r == '？' }

func hasCloserAt(s string, j int) bool {
	r, _ := utf8.DecodeRuneInString(s[j:])
	return r != utf8.RuneError && strings.ContainsRune(closers, r)
}

// wordBefore is the word ending at s[i] (not including it), without
// opening quotes and brackets.
func wordBefore(s string, i int) string {
	start := 0
	if j := strings.LastIndexFunc(s[:i], unicode.IsSpace); j >= 0 {
		_, n := utf8.DecodeRuneInString(s[j:])
		start = j + n // after the space, which may be more than a byte (U+00A0)
	}
	return strings.TrimLeft(s[start:i], "\"'([{«“‘")
}

// isInitial reports whether w is a single capital letter ("J" in
// "J. Smith").
func isInitial(w string) bool {
	r, n := utf8.DecodeRuneInString(w)
	return n == len(w) && unicode.IsUpper(r)
}
