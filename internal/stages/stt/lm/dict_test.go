package lm

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestDictionaryWords(t *testing.T) {
	path := filepath.Join(t.TempDir(), "dict")
	require.NoError(t, os.WriteFile(path, []byte("read R IY D\nread(2) R EH D\nparcel\tP AA R S AH L\nlonely\n\n"), 0o644))
	words, err := DictionaryWords(path)
	require.NoError(t, err)
	require.Equal(t, map[string]bool{"read": true, "parcel": true}, words, "alternates count as their word; a line without phones is no entry")

	_, err = DictionaryWords(filepath.Join(t.TempDir(), "missing"))
	require.ErrorIs(t, err, os.ErrNotExist)
}
