package domain

import (
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"
)

// TestTrailingDocumentSeparatorStillLoads: the refusal of a second YAML
// document (parseYAML) first refused a file that merely ends with a "---"
// line, or one followed by comments only: an empty document, nothing after
// it to drop. intents.yaml, split.yaml and the eval files all go through
// parseYAML.
func TestTrailingDocumentSeparatorStillLoads(t *testing.T) {
	for _, tail := range []string{"---\n", "--- \n", "---\n# end\n"} {
		t.Run(tail, func(t *testing.T) {
			intents := "intents:\n  - name: a\n    examples: [hi]\n  - name: b\n    examples: [bye]\n" + tail
			d, err := LoadFS(fstest.MapFS{IntentsFile: {Data: []byte(intents)}}, "t")
			require.NoError(t, err)
			require.Len(t, d.Intents, 2)
		})
	}
}
