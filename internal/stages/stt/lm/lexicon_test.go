package lm

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestLexicon(t *testing.T) {
	// Out of order, with an alternate before its word's first entry, a
	// byte order mark, tabs, doubled spaces, indentation, Windows line
	// ends, a line with no phones, a word twice, no final newline.
	dict := "\ufeffparcel\tP AA R  S AH L\r\nread(2) R EH D\nread R IY D\nwhere's W EH R Z\nlonely\n" +
		"  about AH B AW T\nhiya HH IY AH\nid IH D\ni'd AY D\nwell W EH L\nwe'll W IY L\nabout AH B AW T S"
	path := filepath.Join(t.TempDir(), "dict")
	require.NoError(t, os.WriteFile(path, []byte(dict), 0o644))
	domain, err := ParsePronunciations(strings.NewReader(";;; the domain's own\n  ;;; indented\n# a comment\nhiya HH AY Y AH\nqr K Y UW AA R\r\nQR(2) K Y UW\nDon't D OW N T\n"), "domain")
	require.NoError(t, err)
	lex, err := ReadLexicon(path, domain)
	require.NoError(t, err)

	tests := []struct {
		word, want string
		ok         bool
	}{
		{"read", "R IY D", true}, // the first pronunciation, not the alternate
		{"parcel", "P AA R S AH L", true},
		{"about", "AH B AW T", true}, // the first of two entries
		{"wheres", "W EH R Z", true}, // without its apostrophe
		{"where's", "W EH R Z", true},
		{"i'd", "AY D", true}, // as said, not "id"
		{"id", "IH D", true},
		{"we'll", "W IY L", true},
		{"well", "W EH L", true},
		{"hiya", "HH AY Y AH", true}, // the domain's entry wins
		{"qr", "K Y UW AA R", true},
		{"don't", "D OW N T", true}, // the domain's words in lower case, as said
		{"dont", "D OW N T", true},  // and folded
		{"lonely", "", false},
		{"read(2)", "", false},
		{";;;", "", false},
		{"zzz", "", false},
		{"", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.word, func(t *testing.T) {
			got, ok := lex.Phones(tt.word)
			require.Equal(t, tt.ok, ok)
			require.Equal(t, tt.want, got)
		})
	}

	_, err = ReadLexicon(filepath.Join(t.TempDir(), "missing"), nil)
	require.ErrorIs(t, err, os.ErrNotExist)
}

func TestParsePronunciations(t *testing.T) {
	got, err := ParsePronunciations(strings.NewReader("\n;;; by hand\n# note\nZebra  Z IY B R AH\n  apple\tAE P AH L\napple(2) AE P L\napple AA P\n"), "p.dict")
	require.NoError(t, err)
	require.Equal(t, []Pronunciation{
		{Word: "apple", Phones: "AE P AH L", Line: 5},
		{Word: "apple", Phones: "AA P", Line: 7}, // one word's entries in the file's order
		{Word: "apple(2)", Phones: "AE P L", Line: 6},
		{Word: "zebra", Phones: "Z IY B R AH", Line: 4},
	}, got)

	for _, tt := range []struct{ text, want string }{
		{"lonely\n", "p.dict:1: want a word and its phones"},
		{"ok OW K EY\nbad b AE D\n", `p.dict:2: bad phone "b"`},
		{"bad AE2\n", `p.dict:1: bad phone "AE2"`},
	} {
		_, err := ParsePronunciations(strings.NewReader(tt.text), "p.dict")
		require.ErrorContains(t, err, tt.want, tt.text)
	}
	_, err = ReadPronunciations(filepath.Join(t.TempDir(), "missing"))
	require.ErrorIs(t, err, os.ErrNotExist)
}

// The recogniser's own dictionary, as Debian installs it: what the server
// gives the intent classifier.
func TestLexiconDebian(t *testing.T) {
	lex, err := ReadLexicon(DefaultDictionary, nil)
	if errors.Is(err, os.ErrNotExist) {
		t.Skip("no pocketsphinx-en-us dictionary:", err)
	}
	require.NoError(t, err)
	require.Greater(t, lex.Len(), 100000)
	for word, want := range map[string]string{
		"lamp":    "L AE M P",
		"refund":  "R IH F AH N D",
		"wheres":  "W EH R Z",
		"couldnt": "K UH D AH N T",
		"i'd":     "AY D",
		"we'll":   "W IY L",
	} {
		got, ok := lex.Phones(word)
		require.True(t, ok, word)
		require.Equal(t, want, got, word)
	}
}

func BenchmarkLexiconPhones(b *testing.B) {
	lex, err := ReadLexicon(DefaultDictionary, nil)
	require.NoError(b, err)
	words := []string{"where", "is", "my", "lamp", "wheres", "refund", "zzzz"}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		lex.Phones(words[i%len(words)])
	}
}

// A pronunciations line longer than the scanner's buffer failed with
// "lm: pronunciations: bufio.Scanner: token too long", naming no file or
// line.
func TestParsePronunciationsLongLineNamesFileAndLine(t *testing.T) {
	text := "ok OW K EY\nlong " + strings.Repeat("AH ", 40000) + "\n"
	_, err := ParsePronunciations(strings.NewReader(text), "p.dict")
	require.ErrorContains(t, err, "p.dict:2: ")
}
