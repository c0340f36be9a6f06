package domain

import (
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"
)

const bomIntents = "intents:\n  - name: a\n    examples: [where is my order]\n  - name: b\n    examples: [hello]\n"

// A wrapped line that starts with "#" but is no ATX heading ("#100234") is text.
func TestHashLineIsNotAHeading(t *testing.T) {
	d, err := LoadFS(fstest.MapFS{
		IntentsFile:          {Data: []byte(bomIntents)},
		"articles/orders.md": {Data: []byte("# Orders\n\nYour order number is on the receipt, for example\n#100234. Quote it when you call.\n")},
	}, "t")
	require.NoError(t, err)
	require.Contains(t, d.Passages("orders")[0].Text, "Quote it when you call.")
}

// Articles and intents.yaml may start with a UTF-8 BOM; so may the other text files.
func TestBOMInOtherFiles(t *testing.T) {
	for name, body := range map[string]string{
		"classes/product.txt": "# products\nlamp\nsofa\n",
		SpokenFile:            "# voice\tquestion\ttranscript\nslt\twhere is my order\twhere is my order\n",
	} {
		_, err := LoadFS(fstest.MapFS{
			IntentsFile: {Data: []byte("\ufeff" + bomIntents)},
			name:        {Data: []byte("\ufeff" + body)},
		}, "t")
		require.NoError(t, err, name)
	}
	d, err := LoadFS(fstest.MapFS{
		IntentsFile:        {Data: []byte(bomIntents)},
		PronunciationsFile: {Data: []byte("\ufeff;;; hand-written\nlamp L AE M P\n")},
	}, "t")
	require.NoError(t, err)
	_, err = d.Pronunciations()
	require.NoError(t, err)
}
