package flite

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Clean makes text safe for Flite, which reads bytes as ASCII and speaks
// every other byte as junk: letters with diacritics become their base
// letters ("café" → "cafe"), typographic quotes, dashes and ellipses
// become ASCII, Markdown emphasis and heading marks and control
// characters become spaces, markup tags (SSML, HTML: see tagLen) are
// left out, and anything else outside ASCII (emoji, other scripts)
// becomes a space. Runs of punctuation are cut to
// maxPunct marks, and tokens longer than maxWord bytes left out (see
// bound). offsets[i] is the
// byte of text that byte i of the result came from (offsets has one more
// entry, len(text)).
func Clean(text string) (clean string, offsets []int) {
	var b strings.Builder
	b.Grow(len(text))
	offsets = make([]int, 0, len(text)+1)
	skip := 0 // the end of a tag left out
	for i, r := range text {
		if i < skip {
			continue
		}
		var rep string
		switch {
		case r == '<' && tagLen(text[i:]) > 0:
			skip = i + tagLen(text[i:])
			rep = " " // keeps the words around it apart
		case r == utf8.RuneError:
			rep = " "
		case r < utf8.RuneSelf:
			if r < ' ' || r == 0x7f || strings.ContainsRune("*_`#~|<>^\\{}", r) {
				rep = " "
			} else {
				rep = text[i : i+1]
			}
		default:
			var ok bool
			if rep, ok = translit[r]; !ok {
				rep = " " // keeps the words around it apart
			}
		}
		for range len(rep) {
			offsets = append(offsets, i)
		}
		b.WriteString(rep)
	}
	offsets = append(offsets, len(text))
	clean, offsets = tightenPunct(b.String(), offsets)
	return bound(clean, offsets)
}

// maxTag is the longest markup tag Clean leaves out, in bytes.
const maxTag = 200

// tagLen is the length of the markup tag s starts with ("<speak>",
// `<break time="1s"/>`, "</p>", "<!-- x -->"), 0 when it starts with
// none: "<" then a letter, "/" and a letter, "!" or "?", up to the next
// ">" within maxTag bytes, with no "<" or line break before it. Flite
// would read a tag's name and attributes aloud ("break time equals one
// s slash"); "a < b" and "x <= 5" are no tags.
func tagLen(s string) int {
	if len(s) < 3 || s[0] != '<' {
		return 0
	}
	i := 1
	if s[i] == '/' {
		i++
	}
	if c := s[i]; !isLetter(c) && (i > 1 || c != '!' && c != '?') {
		return 0
	}
	end := strings.IndexAny(s[1:min(len(s), maxTag)], "<>\n")
	if end < 0 || s[1+end] != '>' {
		return 0
	}
	return end + 2
}

func isLetter(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }

// Limits of what Flite is given. A run of about 320 punctuation marks
// after a word ("a" and 320 dots) corrupts Flite's heap and aborts the
// process; a long "word" (a URL, a code, an LLM's degenerate output) is
// spelled letter by letter, in time that grows with its length (16,000
// letters took 107 s), and is no use to a listener anyway.
const (
	maxPunct = 3  // marks in a row, at most ("...", "?!")
	maxWord  = 40 // bytes without a space; a longer token is not spoken
)

// bound cuts runs of punctuation to maxPunct marks, then leaves out
// tokens longer than maxWord bytes, keeping offsets in step.
func bound(s string, offsets []int) (string, []int) {
	punct := 0
	s, offsets = keep(s, offsets, func(i int) bool {
		if c := s[i]; c == ' ' || isAlnum(c) {
			punct = 0
			return true
		}
		punct++
		return punct <= maxPunct
	})
	end, long := 0, false // the token being read: where it ends, whether it is left out
	return keep(s, offsets, func(i int) bool {
		if s[i] == ' ' {
			return true
		}
		if i >= end { // a token starts
			n := strings.IndexByte(s[i:], ' ')
			if n < 0 {
				n = len(s) - i
			}
			end, long = i+n, n > maxWord
		}
		return !long
	})
}

// keep returns the bytes i of s for which f(i) holds, in order, with
// their offsets.
func keep(s string, offsets []int, f func(i int) bool) (string, []int) {
	out := make([]byte, 0, len(s))
	outOff := make([]int, 0, len(s)+1)
	for i := 0; i < len(s); i++ {
		if f(i) {
			out = append(out, s[i])
			outOff = append(outOff, offsets[i])
		}
	}
	return string(out), append(outOff, offsets[len(s)])
}

func isAlnum(c byte) bool { return isLetter(c) || '0' <= c && c <= '9' }

// tightenPunct drops whitespace before punctuation (left where something
// was removed, as in "5 😀."), which Flite would read as a word of its
// own.
func tightenPunct(s string, offsets []int) (string, []int) {
	out := make([]byte, 0, len(s))
	outOff := offsets[:0:0]
	for i := 0; i < len(s); i++ {
		if s[i] == ' ' {
			j := i
			for j < len(s) && s[j] == ' ' {
				j++
			}
			if j < len(s) && strings.IndexByte(".,!?;:", s[j]) >= 0 && i > 0 {
				i = j - 1
				continue
			}
		}
		out = append(out, s[i])
		outOff = append(outOff, offsets[i])
	}
	return string(out), append(outOff, offsets[len(s)])
}

// speakable reports whether s has a letter or digit to say.
func speakable(s string) bool {
	return strings.IndexFunc(s, func(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }) >= 0
}

var translit = func() map[rune]string {
	m := map[rune]string{
		'‘': "'", '’': "'", '‚': "'", '‛': "'", '′': "'", '“': "\"", '”': "\"", '„': "\"", '″': "\"",
		'«': "\"", '»': "\"", '–': "-", '‑': "-", '‐': "-", '—': ", ", '―': ", ", '−': "-", '…': "...",
		'•': " ", '·': " ", '\u00a0': " ", '\u2009': " ", '\u202f': " ", '\u200b': "", '×': " times ",
		'€': " euro ", '£': " pound ", '¥': " yen ", '°': " degrees ", '½': " one half ",
		'¼': " one quarter ", '¾': " three quarters ", '©': " copyright ", '®': " ", '™': " ",
		'ß': "ss", 'æ': "ae", 'Æ': "AE", 'œ': "oe", 'Œ': "OE", 'ø': "o", 'Ø': "O", 'ł': "l", 'Ł': "L",
		'đ': "d", 'Đ': "D", 'ð': "d", 'Ð': "D", 'þ': "th", 'Þ': "Th", 'ı': "i",
	}
	// Letters with diacritics, by base letter.
	for base, letters := range map[string]string{
		"a": "àáâãäåāăą", "A": "ÀÁÂÃÄÅĀĂĄ", "c": "çćĉċč", "C": "ÇĆĈĊČ", "d": "ď", "D": "Ď",
		"e": "èéêëēĕėęě", "E": "ÈÉÊËĒĔĖĘĚ", "g": "ĝğġģ", "G": "ĜĞĠĢ", "h": "ĥħ", "H": "ĤĦ",
		"i": "ìíîïĩīĭįı", "I": "ÌÍÎÏĨĪĬĮİ", "j": "ĵ", "J": "Ĵ", "k": "ķ", "K": "Ķ", "l": "ĺļľŀ", "L": "ĹĻĽĿ",
		"n": "ñńņňŉ", "N": "ÑŃŅŇ", "o": "òóôõöōŏő", "O": "ÒÓÔÕÖŌŎŐ", "r": "ŕŗř", "R": "ŔŖŘ",
		"s": "śŝşšș", "S": "ŚŜŞŠȘ", "t": "ţťŧț", "T": "ŢŤŦȚ", "u": "ùúûüũūŭůűų", "U": "ÙÚÛÜŨŪŬŮŰŲ",
		"w": "ŵ", "W": "Ŵ", "y": "ýÿŷ", "Y": "ÝŶŸ", "z": "źżž", "Z": "ŹŻŽ",
	} {
		for _, r := range letters {
			m[r] = base
		}
	}
	return m
}()
