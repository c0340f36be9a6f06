//go:build cgo && !nosphinx

package sphinx

import (
	"context"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

// A pronunciations file may list a word the general dictionary has (a
// hand-written override) or a word twice (a hand-written line above
// scripts/pronounce's marker over a derived one below it, as the marker
// invites). The lexicon lets the first win; the recogniser must start too.
// Each case builds an engine from an empty cache, so each has a deadline
// of its own: on a loaded machine one build can take most of a shared one.
func TestPronunciationsOverride(t *testing.T) {
	skipWithoutModels(t)
	corpus := []string{"where is my hoodie", "where is my order"}
	for name, text := range map[string]string{
		"dictionary word": "order AO R D ER\n",
		"listed twice":    "hoodie HH UW D IY\n;;; Derived from espeak-ng by scripts/pronounce (do not edit below; add a word above to override).\nhoodie HH UH D IY\n",
	} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
			defer cancel()
			dir := t.TempDir()
			pf := dir + "/prons.dict"
			require.NoError(t, os.WriteFile(pf, []byte(text), 0o644))
			e, err := New(ctx, Config{Decoders: 1, LM: LMDomain, CacheDir: dir, Pronunciations: pf}, corpus, quiet, nil)
			require.NoError(t, err)
			e.Close()
		})
	}
}
