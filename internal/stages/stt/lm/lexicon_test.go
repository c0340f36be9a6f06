package lm

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestLexicon(t *testing.T) {
	// Out of order, an alternate before its word's first entry can be
	// looked up, tabs, doubled spaces and indentation, a line with no phones, no final
	// newline.
	dict := "parcel\tP AA R  S AH L\nread(2) R EH D\nread R IY D\nwhere's W EH R Z\nlonely\n  about AH B AW T\nhiya HH IY AH"
	path := filepath.Join(t.TempDir(), "dict")
	require.NoError(t, os.WriteFile(path, []byte(dict), 0o644))
	domain := []byte(";;; the domain's own\n# a comment\nhiya HH AY Y AH\nqr K Y UW AA R\nQR(2) K Y UW\n")
	lex, err := ReadLexicon(path, domain)
	require.NoError(t, err)

	tests := []struct {
		word, want string
		ok         bool
	}{
		{"read", "R IY D", true}, // the first pronunciation, not the alternate
		{"parcel", "P AA R S AH L", true},
		{"about", "AH B AW T", true},
		{"wheres", "W EH R Z", true},  // as the classifier writes "where's"
		{"where's", "W EH R Z", true}, // and as the dictionary does
		{"hiya", "HH AY Y AH", true},  // the domain's entry wins
		{"qr", "K Y UW AA R", true},
		{"lonely", "", false},
		{"read(2)", "", false},
		{"zzz", "", false},
		{"", "", false},
	}
	for _, tt := range tests {
		got, ok := lex.Phones(tt.word)
		require.Equal(t, tt.ok, ok, tt.word)
		require.Equal(t, tt.want, got, tt.word)
	}

	_, err = ReadLexicon(filepath.Join(t.TempDir(), "missing"), nil)
	require.ErrorIs(t, err, os.ErrNotExist)
}

// The recogniser's own dictionary, as Debian installs it: what the server
// gives the intent classifier.
func TestLexiconDebian(t *testing.T) {
	lex, err := ReadLexicon(DefaultDictionary, nil)
	require.NoError(t, err, "pocketsphinx-en-us installs the dictionary")
	require.Greater(t, lex.Len(), 100000)
	for word, want := range map[string]string{
		"lamp":    "L AE M P",
		"refund":  "R IH F AH N D",
		"wheres":  "W EH R Z",
		"couldnt": "K UH D AH N T",
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
