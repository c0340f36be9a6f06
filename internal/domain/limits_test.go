package domain

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// requireFileLineError checks err is an *Error naming file (and line, when
// line > 0) with a message containing msg.
func requireFileLineError(t *testing.T, err error, file string, line int, msg string) {
	t.Helper()
	require.Error(t, err)
	var e *Error
	require.ErrorAs(t, err, &e, "%v", err)
	require.Equal(t, file, e.File, "%v", err)
	if line > 0 {
		require.Equal(t, line, e.Line, "%v", err)
	}
	require.Contains(t, e.Msg, msg, "%v", err)
}

// A FIFO (or a device, through a symlink such as one to /dev/zero) where
// a domain file should be blocked startup for ever, or read without end:
// it is refused, naming the file.
func TestLoadRefusesNonRegularFiles(t *testing.T) {
	for _, name := range []string{IntentsFile, ArticlesDir + "/fifo.md", ClassesDir + "/fifo.txt", SpokenFile} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			require.NoError(t, os.MkdirAll(filepath.Join(dir, ArticlesDir), 0o755))
			require.NoError(t, os.MkdirAll(filepath.Join(dir, ClassesDir), 0o755))
			if name != IntentsFile {
				require.NoError(t, os.WriteFile(filepath.Join(dir, IntentsFile), []byte(goodIntents), 0o644))
			}
			fifo := filepath.Join(dir, name)
			require.NoError(t, syscall.Mkfifo(fifo, 0o644))
			done := make(chan error, 1)
			go func() {
				_, err := Load(dir)
				done <- err
			}()
			select {
			case err := <-done:
				requireFileLineError(t, err, filepath.ToSlash(fifo), 0, "not a regular file")
			case <-time.After(10 * time.Second):
				// Unblock the loader's open, then fail.
				if f, err := os.OpenFile(fifo, os.O_WRONLY, 0); err == nil {
					f.Close()
				}
				<-done
				t.Fatalf("Load blocked on the FIFO %s", name)
			}
		})
	}
}

// A domain file larger than MaxFileSize is refused before it is read
// whole, naming the file.
func TestLoadRefusesHugeFiles(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, ArticlesDir), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, IntentsFile), []byte(goodIntents), 0o644))
	big := filepath.Join(dir, ArticlesDir, "big.md")
	require.NoError(t, os.WriteFile(big, []byte("# Big\n\nText.\n"), 0o644))
	require.NoError(t, os.Truncate(big, MaxFileSize+1)) // sparse: NUL bytes, valid UTF-8
	_, err := Load(dir)
	requireFileLineError(t, err, filepath.ToSlash(big), 0, "larger than")
}

// The classifier needs two intents with examples (intent.ErrTooFewIntents):
// a domain with one loaded, then stopped voiced with "intent: intent: need
// at least two intents with examples", naming no file.
func TestLoadNeedsTwoTrainedIntents(t *testing.T) {
	for name, intents := range map[string]string{
		"one intent and a response-only out_of_scope": "intents:\n  - name: hours\n    examples: [when are you open]\n  - name: out_of_scope\n    response: Sorry.\n",
		"out_of_scope alone":                          "intents:\n  - name: out_of_scope\n    examples: [tell me a joke]\n",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := LoadFS(mapFS(map[string]string{IntentsFile: intents}), "dom")
			requireFileLineError(t, err, "dom/intents.yaml", 1, "two intents")
		})
	}
}

// A YAML file that is not UTF-8 (a Latin-1 "é") names the line of the
// first bad byte, as the docs promise for every error.
func TestInvalidUTF8YAMLNamesLine(t *testing.T) {
	intents := "intents:\n  - name: a\n    examples:\n      - caf\xe9 open\n  - name: b\n    examples: [bye]\n"
	_, err := LoadFS(mapFS(map[string]string{IntentsFile: intents}), "dom")
	requireFileLineError(t, err, "dom/intents.yaml", 4, "UTF-8")
}

// A stale spoken.tsv names the line of the transcript whose example is
// gone, not only the file (the sample's has 1,296 lines).
func TestStaleSpokenNamesLine(t *testing.T) {
	spoken := "# voice, example, transcript\nv\thi\thi\nv\tgone now\tgone now\n"
	_, err := LoadFS(mapFS(map[string]string{IntentsFile: goodIntents, SpokenFile: spoken}), "dom")
	requireFileLineError(t, err, "dom/spoken.tsv", 3, `"gone now" is not an intent example`)
}

// Hidden files are not articles or classes: "articles/.md" became an
// article with the empty id (passages "#1"), and the lock file Emacs
// keeps next to a file being edited (".#name.md", a dangling symlink)
// stopped startup with "read article: open articles/.#x.md: no such file
// or directory".
func TestHiddenFilesIgnored(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, ArticlesDir), 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, ClassesDir), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, IntentsFile), []byte(goodIntents), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, ArticlesDir, "gift-cards.md"), []byte(goodArticle), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, ArticlesDir, ".md"), []byte(goodArticle), 0o644))
	require.NoError(t, os.Symlink("user@host.1234:1700000000", filepath.Join(dir, ArticlesDir, ".#gift-cards.md")))
	require.NoError(t, os.WriteFile(filepath.Join(dir, ClassesDir, "._product.txt"), []byte("\x00\x05\x16\x07"), 0o644))
	d, err := Load(dir)
	require.NoError(t, err)
	require.Len(t, d.Articles, 1)
	require.Equal(t, "gift-cards", d.Articles[0].ID)
	require.Empty(t, d.Classes)
}

// Examples are told apart as the classifier tells them: by their words,
// without case or punctuation. "where is my order?" under one intent and
// "Where is my order" under another trained the same document as both;
// an example of punctuation alone trained an empty document.
func TestExamplesComparedByWords(t *testing.T) {
	dup := "intents:\n  - name: a\n    examples: [where is my order]\n  - name: b\n    examples:\n      - \"Where is my order?\"\n"
	_, err := LoadFS(mapFS(map[string]string{IntentsFile: dup}), "dom")
	requireFileLineError(t, err, "dom/intents.yaml", 6, "already listed at line 3")

	apos := "intents:\n  - name: a\n    examples: [where's my order]\n  - name: b\n    examples: [\"wheres my order\"]\n"
	_, err = LoadFS(mapFS(map[string]string{IntentsFile: apos}), "dom")
	requireFileLineError(t, err, "dom/intents.yaml", 5, "already listed at line 3")

	noWords := "intents:\n  - name: a\n    examples: [hello]\n  - name: b\n    examples:\n      - bye\n      - \"?!\"\n"
	_, err = LoadFS(mapFS(map[string]string{IntentsFile: noWords}), "dom")
	requireFileLineError(t, err, "dom/intents.yaml", 7, "no words")

	// Different words are still different examples.
	ok := "intents:\n  - name: a\n    examples: [where is my order]\n  - name: b\n    examples: [where is my orders]\n"
	_, err = LoadFS(mapFS(map[string]string{IntentsFile: ok}), "dom")
	require.NoError(t, err)
}
