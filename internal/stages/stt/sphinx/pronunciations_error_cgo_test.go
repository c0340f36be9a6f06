//go:build cgo && !nosphinx

package sphinx

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// A domain's pronunciations.dict with a phone the acoustic model lacks
// stopped voiced with "sphinx: pronunciations line 2: cannot add ...",
// naming no file: which of the domain's file and -stt.pronunciations was
// meant? The error names the file and line.
func TestPronunciationsErrorNamesFile(t *testing.T) {
	skipWithoutModels(t)
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	dir := t.TempDir()
	pf := filepath.Join(dir, "pronunciations.dict")
	require.NoError(t, os.WriteFile(pf, []byte("zorbix Z AO R B IH K S\nqqq QQ\n"), 0o644))
	corpus := []string{"where is my zorbix", "where is my order"}

	_, err := New(ctx, Config{Decoders: 1, LM: LMDomain, CacheDir: dir, Pronunciations: pf}, corpus, quiet, nil)
	require.ErrorContains(t, err, pf+":2: ")

	_, err = New(ctx, Config{Decoders: 1, LM: LMDomain, CacheDir: dir, PronunciationsData: []byte("zorbix Z AO R B IH K S\nqqq QQ\n")}, corpus, quiet, nil)
	require.ErrorContains(t, err, "domain pronunciations:2: ")
}
