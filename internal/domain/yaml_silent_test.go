package domain

import (
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"
)

// TestIntentsYAMLRefusedNotMisread: intents.yaml that the loader used to
// accept but read as something other than what it says. An empty or null
// grounded decoded into false without an error (the default is true), and
// yaml.Unmarshal read only the first document, dropping the intents after
// a "---" line without a word.
func TestIntentsYAMLRefusedNotMisread(t *testing.T) {
	for _, tt := range []struct {
		name, intents, want string
	}{
		{"grounded empty", "intents:\n  - name: a\n    examples: [hi]\n    grounded:\n  - name: b\n    examples: [bye]\n", "grounded must be true or false"},
		{"grounded null", "intents:\n  - name: a\n    examples: [hi]\n    grounded: ~\n  - name: b\n    examples: [bye]\n", "grounded must be true or false"},
		{"second document", "intents:\n  - name: a\n    examples: [hi]\n---\nintents:\n  - name: b\n    examples: [bye]\n", "a second YAML document"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := LoadFS(fstest.MapFS{IntentsFile: {Data: []byte(tt.intents)}}, "t")
			require.ErrorContains(t, err, tt.want)
		})
	}
}
