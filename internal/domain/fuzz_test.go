package domain

import (
	"errors"
	"io/fs"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/pipeline"
)

// fuzzArticle is the one article of a fuzzed domain; intents may link it.
const fuzzArticle = "gift-cards"

// FuzzLoadFS loads a domain of fuzzed files: an intents file, an article
// and a retrieval evaluation set. A refused domain fails with an *Error
// naming one of its files and a line inside it; a loaded one keeps every
// promise the stages rely on.
func FuzzLoadFS(f *testing.F) {
	f.Fuzz(func(t *testing.T, intents, article, eval string) {
		files := map[string]string{
			IntentsFile:                             intents,
			ArticlesDir + "/" + fuzzArticle + ".md": article,
		}
		if eval != "" { // else the domain has none
			files[RetrievalEvalFile] = eval
		}
		fsys := fstest.MapFS{}
		for name, body := range files {
			fsys[name] = &fstest.MapFile{Data: []byte(body)}
		}
		d, err := LoadFS(fsys, "fz")
		if err != nil {
			requireFileError(t, err, files)
			return
		}
		requireLoaded(t, d)

		cases, err := d.RetrievalEval()
		if eval == "" {
			require.ErrorIs(t, err, fs.ErrNotExist)
			return
		}
		if err != nil {
			requireFileError(t, err, files)
			return
		}
		require.NotEmpty(t, cases)
		for _, c := range cases {
			require.NotEmpty(t, c.Question)
			require.NotEmpty(t, c.Expect)
			for _, id := range c.Expect {
				require.NotEmpty(t, d.Passages(id), "expects unknown article %q", id)
			}
		}
	})
}

// requireFileError checks err is an *Error naming a file of the domain and
// a line that file has (0 for the whole file).
func requireFileError(t *testing.T, err error, files map[string]string) {
	t.Helper()
	de, ok := errors.AsType[*Error](err)
	require.True(t, ok, "%T is not a *domain.Error: %v", err, err)
	name, ok := strings.CutPrefix(de.File, "fz/")
	require.True(t, ok, "file %q", de.File)
	body, ok := files[name]
	require.True(t, ok, "file %q", de.File)
	require.NotEmpty(t, de.Msg)
	// YAML ends lines at CR too (as old Mac editors wrote them), and
	// yaml.v3 may point at the line after the last one (the end of input).
	lines := strings.Count(strings.NewReplacer("\r\n", "\n", "\r", "\n").Replace(body), "\n") + 1
	require.True(t, de.Line >= 0 && de.Line <= lines+1, "%v: line %d of %d", err, de.Line, lines)
}

// requireLoaded checks what the classifier, retrieval, the templater and
// the language model builder rely on in a loaded domain.
func requireLoaded(t *testing.T, d *Domain) {
	t.Helper()
	require.NotEmpty(t, d.Intents)
	names := map[string]bool{}
	trained := 0
	for _, in := range d.Intents {
		require.Regexp(t, intentName, in.Name)
		require.False(t, names[in.Name], "intent %q twice", in.Name)
		names[in.Name] = true
		if len(in.Examples) > 0 {
			trained++
		} else {
			require.Equal(t, OutOfScope, in.Name)
		}
		for _, ex := range in.Examples {
			require.NotEmpty(t, ex)
			require.Equal(t, strings.TrimSpace(ex), ex)
		}
		for _, id := range in.Articles {
			require.NotEmpty(t, d.Passages(id), "intent %q lists unknown article %q", in.Name, id)
		}
		require.NotEmpty(t, d.Template(pipeline.Intent{Name: in.Name}, ""))
	}
	require.Positive(t, trained)
	require.NotEmpty(t, d.Template(pipeline.Intent{}, ""))

	require.Len(t, d.Articles, 1)
	a := d.Articles[0]
	require.Equal(t, fuzzArticle, a.ID)
	require.NotEmpty(t, a.Title)
	ps := d.Passages(a.ID)
	require.NotEmpty(t, ps)
	for i, p := range ps {
		require.Equal(t, PassageID(a.ID, i+1), p.ID)
		require.Equal(t, a.ID, ArticleOf(p.ID))
		require.NotEmpty(t, p.Text)
		require.Equal(t, a.Title, p.Title)
	}

	corpus := d.CorpusSentences()
	require.NotEmpty(t, corpus)
	seen := map[string]bool{}
	for _, s := range corpus {
		require.NotEmpty(t, s)
		require.Equal(t, strings.TrimSpace(s), s)
		require.False(t, seen[s], "sentence %q twice", s)
		seen[s] = true
	}
	for _, in := range d.Intents {
		for _, ex := range in.Examples {
			require.True(t, slices.Contains(corpus, ex), "example %q is not in the corpus", ex)
		}
	}

	_, err := d.ReadFile(PronunciationsFile)
	require.ErrorIs(t, err, fs.ErrNotExist)
}
