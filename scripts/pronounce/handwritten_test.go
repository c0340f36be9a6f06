package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// A pronunciations file saved with Windows line endings hid the marker
// ("...override).\r"), so every derived line was kept as hand-written,
// for ever winning over a new derivation, and each run added one more
// marker and block below them.
func TestHandWrittenFindsMarkerInCRLF(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pronunciations.dict")
	text := "zorbix Z AO R B IH K S\r\n\r\n" + marker + "\r\nglorptastic G L AO R P T EY S T IH K\r\n"
	require.NoError(t, os.WriteFile(path, []byte(text), 0o644))
	hand, err := handWritten(path)
	require.NoError(t, err)
	require.Equal(t, []string{"zorbix Z AO R B IH K S"}, hand)
}
