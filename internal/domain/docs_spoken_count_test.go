package domain

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// docs/domain.md says how many transcripts the sample's spoken.tsv holds,
// of how many examples: the numbers are the file's.
func TestDocSpokenCountIsTrue(t *testing.T) {
	doc, err := os.ReadFile("../../docs/domain.md")
	require.NoError(t, err)
	m := regexp.MustCompile(`now ([\d,]+) transcripts, ([\d,]+) examples by two\s+voices`).FindSubmatch(doc)
	require.NotNil(t, m, "docs/domain.md no longer gives the sample's spoken.tsv counts")
	num := func(b []byte) int {
		n, err := strconv.Atoi(strings.ReplaceAll(string(b), ",", ""))
		require.NoError(t, err)
		return n
	}
	d, err := Default()
	require.NoError(t, err)
	ts, err := d.Transcripts(SpokenFile)
	require.NoError(t, err)
	examples := map[string]bool{}
	for _, tr := range ts {
		examples[tr.Question] = true
	}
	require.Equal(t, len(ts), num(m[1]), "transcripts")
	require.Equal(t, len(examples), num(m[2]), "examples")
}
