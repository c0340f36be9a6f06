package sphinx

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"

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
	info.Missing = slices.DeleteFunc(vocab, known)
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
