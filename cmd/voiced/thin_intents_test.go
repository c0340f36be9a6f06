package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/domain"
)

// TestThinIntents: a small custom domain's intents trained on a handful
// of examples are named at startup (one with none is answered by its
// response only); the sample domain has none.
func TestThinIntents(t *testing.T) {
	dom, err := domain.Default()
	require.NoError(t, err)
	require.Empty(t, thinIntents(dom), "the sample domain")

	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "articles"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "articles", "hours.md"), []byte("# Hours\n\nWe open at nine.\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, domain.IntentsFile), []byte(`fallback: Sorry?
intents:
  - name: opening_hours
    articles: [hours]
    response: We open at nine.
    examples: [when are you open, what are your hours, are you open on saturday]
  - name: greeting
    grounded: false
    response: Hi.
    examples: [hello there, hi, good morning]
  - name: out_of_scope
    response: Sorry, I can only help with the shop.
`), 0o644))
	small, err := domain.Load(dir)
	require.NoError(t, err)
	require.Equal(t, []string{"opening_hours", "greeting"}, thinIntents(small))
}
