package sphinx

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/voiced/voiced/internal/stages/stt/lm"
)

// DomainLM describes the domain language model New built or found.
type DomainLM struct {
	Path      string // ARPA file
	Hash      string // content hash of the normalised corpus
	Cached    bool   // found in the cache rather than built
	Sentences int
	Classes   int // word classes (see lm.Classes)
	Words     int // vocabulary size, class members included
	// Missing lists domain words that neither the dictionary nor the
	// pronunciations file knows; the recogniser cannot produce them.
	Missing []string
}

// buildDomainLM normalises the corpus and writes its n-gram model to the
// cache directory, unless a model for the same content is already there.
func buildDomainLM(cfg Config, corpus []string, known func(string) bool) (DomainLM, error) {
	sents, classes, err := lm.ParseCorpus(corpus)
	if err != nil {
		return DomainLM{}, fmt.Errorf("sphinx: domain corpus: %w", err)
	}
	if len(sents) == 0 {
		return DomainLM{}, fmt.Errorf("sphinx: domain corpus: %w", lm.ErrEmptyCorpus)
	}
	hash := lm.Hash(sents, cfg.Order, classes)
	info := DomainLM{Hash: hash, Sentences: len(sents), Classes: len(classes),
		Path: filepath.Join(cfg.CacheDir, "domain-"+hash[:24]+".arpa")}
	model, err := lm.BuildClasses(sents, cfg.Order, classes)
	if err != nil {
		return DomainLM{}, fmt.Errorf("sphinx: domain model: %w", err)
	}
	vocab := model.Vocabulary()
	info.Words = len(vocab)
	for _, w := range vocab {
		if !known(w) {
			info.Missing = append(info.Missing, w)
		}
	}
	if _, err := os.Stat(info.Path); err == nil {
		info.Cached = true
		return info, nil
	}
	var buf bytes.Buffer
	if err := model.WriteARPA(&buf); err != nil {
		return DomainLM{}, fmt.Errorf("sphinx: domain model: %w", err)
	}
	if err := writeAtomic(info.Path, buf.Bytes()); err != nil {
		return DomainLM{}, fmt.Errorf("sphinx: cache domain model: %w", err)
	}
	return info, nil
}

// writeAtomic writes data to path through a temporary file, so a
// concurrent or interrupted start never sees half a model.
func writeAtomic(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

// pron is one entry of a pronunciations file.
type pron struct {
	word, phones string
	line         int
}

// readPronunciations parses a file in the dictionary's format: a word and
// its phones per line; blank lines and lines starting with ";;;" or "#"
// are skipped.
func readPronunciations(path string) ([]pron, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("sphinx: pronunciations: %w", err)
	}
	defer f.Close()
	return parsePronunciations(f, path)
}

// parsePronunciations parses pronunciations from r; path names it in
// errors.
func parsePronunciations(r io.Reader, path string) ([]pron, error) {
	var out []pron
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, ";;;") || strings.HasPrefix(line, "#") {
			continue
		}
		fs := strings.Fields(line)
		if len(fs) < 2 {
			return nil, fmt.Errorf("sphinx: pronunciations %s:%d: want a word and its phones", path, n)
		}
		for _, p := range fs[1:] {
			if strings.ToUpper(p) != p || strings.ContainsFunc(p, func(r rune) bool { return r < 'A' || r > 'Z' }) {
				return nil, fmt.Errorf("sphinx: pronunciations %s:%d: bad phone %q", path, n, p)
			}
		}
		out = append(out, pron{word: strings.ToLower(fs[0]), phones: strings.Join(fs[1:], " "), line: n})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("sphinx: pronunciations: %w", err)
	}
	slices.SortStableFunc(out, func(a, b pron) int { return strings.Compare(a.word, b.word) })
	return out, nil
}
