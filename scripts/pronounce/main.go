// Command pronounce gives every word of a domain's recogniser vocabulary a
// pronunciation: the intent examples, the article text and every word of
// the word classes (classes/*.txt). A word the general dictionary lacks,
// and the domain's pronunciations file does not list by hand, gets one
// derived from espeak-ng's phonemes (`espeak-ng -q -x -v en-us`) mapped to
// the dictionary's phone set. The hand-written entries are kept; the
// derived ones are rewritten below a marker line, so running it again
// after editing the domain is safe.
//
//	go run ./scripts/pronounce [-domain domain/helpdesk] [-dict /usr/share/pocketsphinx/model/en-us/cmudict-en-us.dict]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/voiced/voiced/internal/domain"
	"github.com/voiced/voiced/internal/stages/stt/lm"
)

// marker starts the derived entries of a pronunciations file.
const marker = ";;; Derived from espeak-ng by scripts/pronounce (do not edit below; add a word above to override)."

func main() {
	if err := run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "pronounce:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	dir := flag.String("domain", "domain/helpdesk", "domain folder")
	dict := flag.String("dict", "/usr/share/pocketsphinx/model/en-us/cmudict-en-us.dict", "the recogniser's general dictionary")
	flag.Parse()
	d, err := domain.Load(*dir)
	if err != nil {
		return err
	}
	known, err := lm.DictionaryWords(*dict)
	if err != nil {
		return err
	}
	path := filepath.Join(*dir, domain.PronunciationsFile)
	hand, err := handWritten(path)
	if err != nil {
		return err
	}
	for _, l := range hand {
		if f := strings.Fields(l); len(f) > 1 && !strings.HasPrefix(l, ";") && !strings.HasPrefix(l, "#") {
			known[f[0]] = true
		}
	}
	sents, classes, err := lm.ParseCorpus(d.CorpusSentences())
	if err != nil {
		return err
	}
	vocab := map[string]bool{}
	for _, s := range sents {
		for _, w := range s {
			vocab[w] = true
		}
	}
	for _, ws := range classes {
		for _, w := range ws {
			vocab[w] = true
		}
	}
	var derived []string
	for _, w := range slices.Sorted(func(yield func(string) bool) {
		for w := range vocab {
			if !yield(w) {
				return
			}
		}
	}) {
		if known[w] {
			continue
		}
		phones, err := espeak(ctx, w)
		if err != nil {
			return fmt.Errorf("%s: %w", w, err)
		}
		derived = append(derived, w+" "+phones)
	}
	out := strings.Join(hand, "\n")
	if out != "" {
		out += "\n"
	}
	out += marker + "\n"
	for _, l := range derived {
		out += l + "\n"
	}
	fmt.Printf("%d words, %d derived from espeak-ng\n", len(vocab), len(derived))
	return os.WriteFile(path, []byte(out), 0o644)
}

// handWritten returns the lines of the pronunciations file above the
// marker.
func handWritten(path string) ([]string, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for l := range strings.Lines(string(data)) {
		l = strings.TrimRight(l, "\r\n") // a file saved with Windows line endings too
		if l == marker {
			break
		}
		out = append(out, l)
	}
	for len(out) > 0 && strings.TrimSpace(out[len(out)-1]) == "" {
		out = out[:len(out)-1]
	}
	return out, nil
}

func espeak(ctx context.Context, word string) (string, error) {
	out, err := exec.CommandContext(ctx, "espeak-ng", "-q", "-x", "-v", "en-us", word).Output()
	if err != nil {
		return "", fmt.Errorf("espeak-ng: %w", err)
	}
	return ToCMU(strings.TrimSpace(string(out)))
}
