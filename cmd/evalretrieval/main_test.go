package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// testTimeout bounds each run: with -answers it trains the intent
// classifier, which takes seconds under -race on a busy 2-core machine (and
// has taken over 30 s while other jobs loaded it), and the sample domain
// has eight sets (about 1,400 questions) to answer: the whole run took
// 106-131 s under -race at load 11 on 2026-12-01 (the same before and after
// article keywords).
const testTimeout = 5 * time.Minute

// The SQLite driver starts a goroutine per query that watches its context.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func write(t *testing.T, dir, name, body string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644))
}

// contains fails unless out contains want. On failure it prints the output
// only up to the first held-out set: a failing test must not show the
// held-out questions (their MISS lines), which nobody tunes on.
func contains(t *testing.T, out, want string) {
	t.Helper()
	if strings.Contains(out, want) {
		return
	}
	shown, _, _ := strings.Cut(out, "(held-out")
	t.Fatalf("output lacks %q; output before the held-out sets:\n%s", want, shown)
}

func TestRun(t *testing.T) {
	runT := func(args []string, out *bytes.Buffer) error {
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		return run(ctx, args, out)
	}

	var out bytes.Buffer
	if err := runT(nil, &out); err != nil {
		contains(t, out.String(), "no error: "+err.Error())
	}
	contains(t, out.String(), "eval/retrieval.yaml: 65 questions\nrecall@3:")
	contains(t, out.String(), "eval/retrieval-spoken.yaml: 45 questions\nrecall@3:")
	// The caller question sets, labelled, with first-source figures.
	contains(t, out.String(), "eval/heldout.yaml (held-out, text): 153 questions\nwith expected articles:")
	contains(t, out.String(), "eval/tuning.yaml (tuning, text): 184 questions\n")
	contains(t, out.String(), "first passage from an expected article:")
	contains(t, out.String(), "answers whose first source is an expected article:")
	contains(t, out.String(), "out-of-scope, greeting and goodbye answers citing a passage:")
	require.GreaterOrEqual(t, strings.Count(out.String(), "answers citing an expected article:"), 4)

	// While tuning, the held-out sets are not run.
	out.Reset()
	require.NoError(t, runT([]string{"-heldout=false", "-answers=false"}, &out), out.String())
	require.Contains(t, out.String(), "eval/tuning.yaml (tuning, text): 184 questions\n")
	require.NotContains(t, out.String(), "held-out")

	// As voiced builds them, on every example: the caller sets only.
	out.Reset()
	require.NoError(t, runT([]string{"-shipped", "-heldout=false", "-answers=false"}, &out), out.String())
	require.Contains(t, out.String(), "eval/tuning.yaml (tuning, text): 184 questions\n")
	require.NotContains(t, out.String(), "eval/retrieval.yaml")
	require.NotContains(t, out.String(), "held-out")

	dir := t.TempDir()
	write(t, dir, "intents.yaml", "intents:\n  - name: a\n    examples: [x]\n  - name: b\n    examples: [y]\n")
	write(t, dir, "articles/apples.md", "# Apples\n\nApples are red.\n")
	write(t, dir, "articles/pears.md", "# Pears\n\nPears are green.\n")
	for _, fruit := range []string{"cherries", "plums", "grapes"} {
		write(t, dir, "articles/"+fruit+".md", "# "+fruit+"\n\nWe sell "+fruit+" in summer.\n")
	}
	write(t, dir, "eval/retrieval.yaml", "questions:\n  - question: are apples red\n    expect: [apples]\n  - question: what colour are bananas\n    expect: [pears]\n")
	out.Reset()
	err := runT([]string{"-domain", dir, "-k", "1", "-v"}, &out)
	require.ErrorContains(t, err, "eval/retrieval.yaml: recall@1 0.500 is below 0.900")
	require.Contains(t, out.String(), `MISS "what colour are bananas"`)
	require.Contains(t, out.String(), `hit  "are apples red"`)
	require.NotContains(t, out.String(), "retrieval-spoken")
	// The apples question is answered from its article, the bananas one
	// from nothing (no word of it is in the domain).
	require.Contains(t, out.String(), "answers citing an expected article: 1/2; citing another article: 0/2; citing none: 1/2")
	require.Contains(t, out.String(), `answer "are apples red" (`)

	// The spoken set is measured, and checked against its own minimum.
	write(t, dir, "eval/retrieval-spoken.yaml", "questions:\n  - question: red apples\n    expect: [apples]\n  - question: bananas\n    expect: [pears]\n")
	out.Reset()
	err = runT([]string{"-domain", dir, "-k", "1", "-min", "0.5", "-min-spoken", "0.6", "-answers=false"}, &out)
	require.EqualError(t, err, "eval/retrieval-spoken.yaml: recall@1 0.500 is below 0.600")
	require.Contains(t, out.String(), "eval/retrieval-spoken.yaml: 2 questions\nrecall@1: 0.500 (1/2)")
	require.NoError(t, runT([]string{"-domain", dir, "-k", "1", "-min", "0.5", "-min-spoken", "0.5", "-answers=false"}, &out))
	require.NoError(t, os.Remove(filepath.Join(dir, "eval", "retrieval-spoken.yaml")))

	require.NoError(t, os.Remove(filepath.Join(dir, "eval", "retrieval.yaml")))
	require.ErrorIs(t, runT([]string{"-domain", dir}, &out), os.ErrNotExist)
}

// With -shipped the classifier and the articles' questions come from every
// example: an intent whose examples are all held out is one only -shipped
// knows, and only it finds the article that intent links.
func TestShipped(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "intents.yaml", `intents:
  - name: fruit
    examples: [i want something sweet to eat, got anything sweet for a snack, sweet snacks please]
    articles: [apples]
  - name: weather
    examples: [is it raining, will it rain today, is it sunny, sunny tomorrow]
    articles: [umbrellas]
  - name: music
    examples: [play a song, play some music, next song please, turn the music up]
`)
	write(t, dir, "articles/apples.md", "# Apples\n\nApples are red and sweet.\n")
	write(t, dir, "articles/umbrellas.md", "# Umbrellas\n\nUmbrellas keep the rain off.\n")
	write(t, dir, "eval/retrieval.yaml", "questions:\n  - question: are apples red\n    expect: [apples]\n")
	write(t, dir, "eval/split.yaml", "heldout:\n  fruit: [i want something sweet to eat, got anything sweet for a snack, sweet snacks please]\n")
	write(t, dir, "eval/tuning.yaml", "questions:\n  - {question: \"anything sweet for a snack\", intent: fruit, expect: [apples]}\n")
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()

	first := "answers whose first source is an expected article: "
	var out bytes.Buffer
	require.NoError(t, run(ctx, []string{"-domain", dir, "-heldout=false", "-min", "0"}, &out))
	require.Contains(t, out.String(), first+"0/1", "the training split has no fruit example")
	out.Reset()
	require.NoError(t, run(ctx, []string{"-domain", dir, "-heldout=false", "-shipped"}, &out))
	require.Contains(t, out.String(), first+"1/1")
	require.NotContains(t, out.String(), "eval/retrieval.yaml")
}
