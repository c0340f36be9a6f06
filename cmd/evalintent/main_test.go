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
)

const testTimeout = 10 * time.Second

func TestRun(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "intents.yaml"), []byte(`intents:
  - name: weather
    examples: [is it raining, will it rain today, is it sunny, sunny tomorrow, rain this afternoon, how hot is it]
  - name: music
    examples: [play a song, play some music, next song please, turn the music up, play jazz, stop the music]
`), 0o644))
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()

	var out bytes.Buffer
	require.NoError(t, run(ctx, []string{"-domain", dir, "-k", "3", "-min", "0", "-v"}, &out))
	require.Contains(t, out.String(), "training split, 3-fold cross-validation accuracy")
	require.Contains(t, out.String(), "weather")
	require.NotContains(t, out.String(), "sets it has not seen", "no split, no unseen sets")

	// With a split file, the held-out examples are reported apart and
	// left out of training.
	split := filepath.Join(dir, "eval", "split.yaml")
	require.NoError(t, os.MkdirAll(filepath.Dir(split), 0o755))
	require.NoError(t, os.WriteFile(split, []byte("tuning:\n  weather: [rain this afternoon]\nheldout:\n  weather: [how hot is it]\n  music: [stop the music]\n"), 0o644))
	out.Reset()
	require.NoError(t, run(ctx, []string{"-domain", dir, "-k", "3", "-min", "0", "-noise=false"}, &out))
	require.Contains(t, out.String(), "9 training examples (training split)")
	require.Contains(t, out.String(), "| heldout split (intent examples) | held-out | 2 |")
	// The out_of_scope grid is printed for the tuning set only.
	require.Contains(t, out.String(), "| tuning split (intent examples) | 1.000 |")
	require.Contains(t, out.String(), "| none | 1.000 (1/1) |")
	require.NotContains(t, out.String(), "| heldout split (intent examples) | 1.000 |")

	// The classifier voiced ships trains on every example, so only the
	// caller questions, which it has not seen, are reported against it;
	// -heldout=false leaves the held-out ones out there too.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "eval", "tuning.yaml"), []byte("questions:\n  - {question: \"is it going to rain\", intent: weather}\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "eval", "heldout.yaml"), []byte("questions:\n  - {question: \"play me a song\", intent: music}\n"), 0o644))
	out.Reset()
	require.NoError(t, run(ctx, []string{"-domain", dir, "-k", "3", "-min", "0", "-noise=false"}, &out))
	_, ship, ok := strings.Cut(out.String(), "the classifier voiced ships")
	require.True(t, ok, out.String())
	require.Contains(t, ship, "| eval/tuning.yaml (text) | tuning | 1 |")
	require.Contains(t, ship, "| eval/heldout.yaml (text) | held-out | 1 |")
	require.NotContains(t, ship, "split (intent examples)", "it trained on the splits")
	out.Reset()
	require.NoError(t, run(ctx, []string{"-domain", dir, "-k", "3", "-min", "0", "-noise=false", "-heldout=false"}, &out))
	_, ship, ok = strings.Cut(out.String(), "the classifier voiced ships")
	require.True(t, ok)
	require.NotContains(t, ship, "heldout.yaml")

	// -write-split writes the deterministic split.
	require.NoError(t, run(ctx, []string{"-domain", dir, "-write-split", split}, &out))
	data, err := os.ReadFile(split)
	require.NoError(t, err)
	require.Contains(t, string(data), "tuning:\n")

	out.Reset()
	err = run(ctx, []string{"-domain", dir, "-k", "3", "-min", "1.01"}, &out)
	require.ErrorContains(t, err, "below 1.010")

	err = run(ctx, []string{"-domain", filepath.Join(dir, "missing")}, &out)
	require.Error(t, err)
}

// The shipped classifier trains on every example, the evaluation's on the
// training split alone: an intent whose examples are all held out is one
// only the shipped classifier knows.
func TestShipped(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) {
		t.Helper()
		p := filepath.Join(dir, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
	}
	write("intents.yaml", `intents:
  - name: weather
    examples: [is it raining, will it rain today, is it sunny, sunny tomorrow, rain this afternoon, how hot is it]
  - name: music
    examples: [play a song, play some music, next song please, turn the music up, play jazz, stop the music]
  - name: news
    examples: [read me the news, what is in the news today, any news headlines]
`)
	write("eval/split.yaml", "heldout:\n  news: [read me the news, what is in the news today, any news headlines]\n")
	write("eval/tuning.yaml", "questions:\n  - {question: \"read me the news headlines\", intent: news}\n")
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()

	var out bytes.Buffer
	require.NoError(t, run(ctx, []string{"-domain", dir, "-k", "3", "-min", "0", "-noise=false"}, &out))
	eval, ship, ok := strings.Cut(out.String(), "the classifier voiced ships")
	require.True(t, ok, out.String())
	require.Contains(t, eval, "| eval/tuning.yaml (text) | tuning | 1 | **0.000** (0/1) |", "the training split has no news example")
	require.Contains(t, ship, "| eval/tuning.yaml (text) | tuning | 1 | **1.000** (1/1) |")
}
