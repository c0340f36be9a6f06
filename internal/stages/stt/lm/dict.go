package lm

import (
	"bytes"
	"fmt"
	"os"
	"strings"
)

// DictionaryWords returns the words of a pronunciation dictionary in
// CMUdict's format ("word  PH O N E S" per line; alternates such as
// "read(2)" count as "read"): the words a model built for the recogniser
// may use.
func DictionaryWords(path string) (map[string]bool, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("lm: dictionary: %w", err)
	}
	words := make(map[string]bool, 140000)
	for line := range bytes.Lines(data) {
		f := bytes.Fields(line)
		if len(f) < 2 {
			continue
		}
		w := string(f[0])
		if i := strings.IndexByte(w, '('); i > 0 {
			w = w[:i]
		}
		words[w] = true
	}
	return words, nil
}
