package domain

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/pipeline"
)

const goodIntents = `fallback: Say that again?
intents:
  - name: greeting
    response: Hello there.
    examples:
      - hi
      - hello
  - name: goodbye
    examples: [bye, see you]
  - name: out_of_scope
    response: I can't help with that.
`

const goodArticle = "# Gift cards\n\nGift cards **never** expire.\nThey have no fees.\n\n## Balance\n\n- Check it [online](https://example.test).\n- Or in store.\n"

func mapFS(files map[string]string) fstest.MapFS {
	m := fstest.MapFS{}
	for name, body := range files {
		m[name] = &fstest.MapFile{Data: []byte(body)}
	}
	return m
}

func TestLoadFSGood(t *testing.T) {
	d, err := LoadFS(mapFS(map[string]string{
		IntentsFile:              goodIntents,
		"articles/gift-cards.md": goodArticle,
	}), "test")
	require.NoError(t, err)
	require.Equal(t, "Say that again?", d.Fallback)
	require.Len(t, d.Intents, 3)
	require.Equal(t, Intent{Name: "greeting", Examples: []string{"hi", "hello"}, Response: "Hello there."}, d.Intents[0])
	require.Empty(t, d.Intents[2].Examples)
	require.Len(t, d.Articles, 1)
	a := d.Articles[0]
	require.Equal(t, "gift-cards", a.ID)
	require.Equal(t, "Gift cards", a.Title)
	require.Equal(t, "articles/gift-cards.md", a.Path)
	require.Equal(t, []Paragraph{
		{Text: "Gift cards never expire. They have no fees."},
		{Heading: "Balance", Text: "Check it online."},
		{Heading: "Balance", Text: "Or in store."},
	}, a.Paragraphs())
	require.Equal(t, []string{
		"hi", "hello", "bye", "see you",
		"Gift cards", "Gift cards never expire.", "They have no fees.",
		"Balance", "Check it online.", "Or in store.",
	}, d.CorpusSentences())
}

// An article's front matter gives its keywords; they are not part of its
// body, its passages or the recogniser's corpus.
func TestArticleKeywords(t *testing.T) {
	tests := []struct {
		name, article string
		want          []string
	}{
		{"none", goodArticle, nil},
		{"flow list", "---\nkeywords: [voucher, gift certificate, doesn't expire]\n---\n" + goodArticle, []string{"voucher", "gift certificate", "doesn't expire"}},
		{"block list, comment, blank lines", "\n---\n# callers say\nkeywords:\n  - voucher\n  - \" present \"\n---\n\n" + goodArticle, []string{"voucher", "present"}},
		{"empty front matter", "---\n---\n" + goodArticle, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := LoadFS(mapFS(map[string]string{IntentsFile: goodIntents, "articles/gift-cards.md": tt.article}), "test")
			require.NoError(t, err)
			a := d.Articles[0]
			require.Equal(t, tt.want, a.Keywords)
			require.Equal(t, "Gift cards", a.Title)
			require.Len(t, a.Paragraphs(), 3)
			require.NotContains(t, strings.Join(d.CorpusSentences(), " "), "voucher")
		})
	}
}

// An article's front matter may name word classes: their words are the
// article's class words, for retrieval, and neither its keywords nor its
// text.
func TestArticleClasses(t *testing.T) {
	files := map[string]string{
		IntentsFile:              goodIntents,
		"classes/abroad.txt":     "# places abroad\ntoronto\ndublin\n",
		"classes/product.txt":    "lamp\n",
		"articles/gift-cards.md": "---\nclasses: [abroad, product]\nkeywords: [voucher]\n---\n" + goodArticle,
	}
	d, err := LoadFS(mapFS(files), "test")
	require.NoError(t, err)
	a := d.Articles[0]
	require.Equal(t, []string{"abroad", "product"}, a.Classes)
	require.Equal(t, []string{"toronto", "dublin", "lamp"}, a.ClassWords)
	require.Equal(t, []string{"voucher"}, a.Keywords)
	require.Len(t, a.Paragraphs(), 3)
}

func TestLoadErrors(t *testing.T) {
	tests := []struct {
		name    string
		files   map[string]string
		file    string
		line    int
		message string
	}{
		{
			name:    "missing intents file",
			files:   map[string]string{"articles/a.md": "# A\n\ntext\n"},
			file:    "dom/intents.yaml",
			message: "missing",
		},
		{
			name:    "bad yaml",
			files:   map[string]string{IntentsFile: "intents:\n  - name: greeting\n    examples: hi: there\n"},
			file:    "dom/intents.yaml",
			line:    3,
			message: "invalid YAML",
		},
		{
			name:    "tab indentation",
			files:   map[string]string{IntentsFile: "intents:\n\t- name: greeting\n"},
			file:    "dom/intents.yaml",
			line:    2,
			message: "invalid YAML",
		},
		{
			name:    "empty file",
			files:   map[string]string{IntentsFile: "# nothing\n"},
			file:    "dom/intents.yaml",
			message: "empty file",
		},
		{
			name:    "intent without examples",
			files:   map[string]string{IntentsFile: "intents:\n  - name: greeting\n    examples: [hi]\n  - name: goodbye\n    response: Bye.\n"},
			file:    "dom/intents.yaml",
			line:    4,
			message: `intent "goodbye" has no examples`,
		},
		{
			name:    "empty examples list",
			files:   map[string]string{IntentsFile: "intents:\n  - name: greeting\n    examples: []\n"},
			file:    "dom/intents.yaml",
			line:    2,
			message: "has no examples",
		},
		{
			name:    "empty example",
			files:   map[string]string{IntentsFile: "intents:\n  - name: greeting\n    examples:\n      - hi\n      - \"  \"\n"},
			file:    "dom/intents.yaml",
			line:    5,
			message: "empty example",
		},
		{
			name:    "duplicate intent",
			files:   map[string]string{IntentsFile: "intents:\n  - name: greeting\n    examples: [hi]\n  - name: greeting\n    examples: [hello]\n"},
			file:    "dom/intents.yaml",
			line:    4,
			message: "already defined at line 2",
		},
		{
			name:    "duplicate example",
			files:   map[string]string{IntentsFile: "intents:\n  - name: greeting\n    examples: [hi]\n  - name: goodbye\n    examples:\n      - bye\n      - Hi\n"},
			file:    "dom/intents.yaml",
			line:    7,
			message: `example "Hi" is already listed at line 3`,
		},
		{
			name:    "unknown field",
			files:   map[string]string{IntentsFile: "intents:\n  - name: greeting\n    exmaples: [hi]\n"},
			file:    "dom/intents.yaml",
			line:    3,
			message: `unknown field "exmaples"`,
		},
		{
			name:    "bad intent name",
			files:   map[string]string{IntentsFile: "intents:\n  - name: Order Status\n    examples: [hi]\n"},
			file:    "dom/intents.yaml",
			line:    2,
			message: "lower case",
		},
		{
			name:    "intent without name",
			files:   map[string]string{IntentsFile: "intents:\n  - examples: [hi]\n"},
			file:    "dom/intents.yaml",
			line:    2,
			message: "without a name",
		},
		{
			name:    "examples not a list",
			files:   map[string]string{IntentsFile: "intents:\n  - name: greeting\n    examples: hi\n"},
			file:    "dom/intents.yaml",
			line:    3,
			message: "must be a list",
		},
		{
			name:    "no intents",
			files:   map[string]string{IntentsFile: "fallback: hm\n"},
			file:    "dom/intents.yaml",
			line:    1,
			message: "no intents",
		},
		{
			name:    "empty article",
			files:   map[string]string{IntentsFile: goodIntents, "articles/empty.md": "\n\n"},
			file:    "dom/articles/empty.md",
			line:    1,
			message: "empty article",
		},
		{
			// Found writing FuzzLoadFS: the title was checked before its
			// markup was removed, so an article could load with none.
			name:    "title that is only markup",
			files:   map[string]string{IntentsFile: goodIntents, "articles/a.md": "# **[](x)**\n\ntext\n"},
			file:    "dom/articles/a.md",
			line:    1,
			message: `an article must start with its title as "# Title"`,
		},
		{
			name:    "article with only a title",
			files:   map[string]string{IntentsFile: goodIntents, "articles/a.md": "\n# Title only\n\n## Heading\n"},
			file:    "dom/articles/a.md",
			line:    2,
			message: "no text after the title",
		},
		{
			name:    "intent lists an unknown article",
			files:   map[string]string{IntentsFile: "intents:\n  - name: greeting\n    examples: [hi]\n    articles:\n      - a\n      - nope\n  - name: goodbye\n    examples: [bye]\n", "articles/a.md": "# A\n\ntext\n"},
			file:    "dom/intents.yaml",
			line:    6,
			message: `intent "greeting" lists unknown article "nope"`,
		},
		{
			name:    "articles not a list",
			files:   map[string]string{IntentsFile: "intents:\n  - name: greeting\n    examples: [hi]\n    articles: a\n", "articles/a.md": "# A\n\ntext\n"},
			file:    "dom/intents.yaml",
			line:    4,
			message: "articles must be a list",
		},
		{
			name:    "article listed twice",
			files:   map[string]string{IntentsFile: "intents:\n  - name: greeting\n    examples: [hi]\n    articles: [a, a]\n", "articles/a.md": "# A\n\ntext\n"},
			file:    "dom/intents.yaml",
			line:    4,
			message: `article "a" is listed twice`,
		},
		{
			name:    "empty article id",
			files:   map[string]string{IntentsFile: "intents:\n  - name: greeting\n    examples: [hi]\n    articles: [\"\"]\n", "articles/a.md": "# A\n\ntext\n"},
			file:    "dom/intents.yaml",
			line:    4,
			message: "empty article id",
		},
		{
			name:    "article without title",
			files:   map[string]string{IntentsFile: goodIntents, "articles/a.md": "\nJust text.\n"},
			file:    "dom/articles/a.md",
			line:    2,
			message: "# Title",
		},
		{
			name:    "front matter not closed",
			files:   map[string]string{IntentsFile: goodIntents, "articles/a.md": "\n---\nkeywords: [a]\n# A\n\ntext\n"},
			file:    "dom/articles/a.md",
			line:    2,
			message: "front matter is not closed",
		},
		{
			name:    "unknown front matter field",
			files:   map[string]string{IntentsFile: goodIntents, "articles/a.md": "---\nkeywords: [a]\ntags: [b]\n---\n# A\n\ntext\n"},
			file:    "dom/articles/a.md",
			line:    3,
			message: `unknown front matter field "tags" (want keywords or classes)`,
		},
		{
			name:    "keywords not a list",
			files:   map[string]string{IntentsFile: goodIntents, "articles/a.md": "---\n# a comment\nkeywords: swap\n---\n# A\n\ntext\n"},
			file:    "dom/articles/a.md",
			line:    3,
			message: "keywords must be a list",
		},
		{
			name:    "classes not a list",
			files:   map[string]string{IntentsFile: goodIntents, "articles/a.md": "---\nclasses: abroad\n---\n# A\n\ntext\n"},
			file:    "dom/articles/a.md",
			line:    2,
			message: "classes must be a list",
		},
		{
			name:    "bad class name",
			files:   map[string]string{IntentsFile: goodIntents, "articles/a.md": "---\nclasses:\n  - Abroad\n---\n# A\n\ntext\n"},
			file:    "dom/articles/a.md",
			line:    3,
			message: `class name "Abroad"`,
		},
		{
			name:    "unknown class",
			files:   map[string]string{IntentsFile: goodIntents, "articles/a.md": "---\nclasses: [abroad]\n---\n# A\n\ntext\n"},
			file:    "dom/articles/a.md",
			message: `names class "abroad", which the domain does not have`,
		},
		{
			name:    "empty keyword",
			files:   map[string]string{IntentsFile: goodIntents, "articles/a.md": "---\nkeywords:\n  - swap\n  - \"\"\n---\n# A\n\ntext\n"},
			file:    "dom/articles/a.md",
			line:    4,
			message: "empty keyword",
		},
		{
			name:    "front matter not YAML",
			files:   map[string]string{IntentsFile: goodIntents, "articles/a.md": "---\nkeywords: [a\n---\n# A\n\ntext\n"},
			file:    "dom/articles/a.md",
			line:    2,
			message: "invalid YAML",
		},
		{
			name:    "front matter without a title after it",
			files:   map[string]string{IntentsFile: goodIntents, "articles/a.md": "---\nkeywords: [a]\n---\ntext\n"},
			file:    "dom/articles/a.md",
			line:    4,
			message: "# Title",
		},
		{
			name:    "article not utf-8",
			files:   map[string]string{IntentsFile: goodIntents, "articles/a.md": "# T\n\n\xff\xfe\n"},
			file:    "dom/articles/a.md",
			line:    3, // docs/domain.md: the line of the first other byte
			message: "UTF-8",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := LoadFS(mapFS(tt.files), "dom")
			require.Error(t, err)
			var de *Error
			require.ErrorAs(t, err, &de, "error %v", err)
			require.Equal(t, tt.file, de.File)
			require.Equal(t, tt.line, de.Line, "error %v", err)
			require.Contains(t, de.Msg, tt.message)
			want := tt.file + ":"
			require.Contains(t, err.Error(), want)
		})
	}
}

func TestLoadFromDisk(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, ArticlesDir), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, IntentsFile), []byte(goodIntents), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, ArticlesDir, "bad.md"), []byte("# Bad\n"), 0o644))

	_, err := Load(dir)
	require.ErrorContains(t, err, filepath.ToSlash(filepath.Join(dir, "articles", "bad.md"))+":1: empty article")

	require.NoError(t, os.WriteFile(filepath.Join(dir, ArticlesDir, "bad.md"), []byte("# Good\n\nNow with text.\n"), 0o644))
	d, err := Load(dir)
	require.NoError(t, err)
	require.Equal(t, dir, d.Dir)
	require.Empty(t, d.PronunciationsPath())
	path, data, err := d.PronunciationsSource()
	require.NoError(t, err)
	require.Empty(t, path, "no pronunciations file")
	require.Empty(t, data)

	dict := filepath.Join(dir, PronunciationsFile)
	require.NoError(t, os.WriteFile(dict, []byte("maple M EY P AH L\n"), 0o644))
	require.Equal(t, dict, d.PronunciationsPath())
	b, err := d.ReadFile(PronunciationsFile)
	require.NoError(t, err)
	require.Contains(t, string(b), "maple")
	path, data, err = d.PronunciationsSource()
	require.NoError(t, err)
	require.Equal(t, dict, path, "a domain on disk: the recogniser reads the file")
	require.Empty(t, data)

	viaFlag, err := LoadOrDefault(dir)
	require.NoError(t, err)
	require.Equal(t, dir, viaFlag.Dir)
	def, err := LoadOrDefault("")
	require.NoError(t, err)
	require.Equal(t, "helpdesk", def.Name)
	path, data, err = def.PronunciationsSource()
	require.NoError(t, err)
	require.Empty(t, path, "the embedded domain has no path")
	require.NotEmpty(t, data, "the embedded domain gives its pronunciations' content")

	_, err = Load(filepath.Join(dir, "nope"))
	require.ErrorIs(t, err, fs.ErrNotExist)
	_, err = Load(filepath.Join(dir, IntentsFile))
	require.ErrorContains(t, err, "not a directory")
}

func TestTemplate(t *testing.T) {
	d, err := LoadFS(mapFS(map[string]string{IntentsFile: goodIntents}), "t")
	require.NoError(t, err)
	noFallback, err := LoadFS(mapFS(map[string]string{IntentsFile: "intents:\n  - name: greeting\n    examples: [hi]\n  - name: goodbye\n    examples: [bye]\n"}), "t")
	require.NoError(t, err)
	tests := []struct {
		name       string
		d          *Domain
		intent     string
		transcript string
		want       string
	}{
		{"known intent", d, "greeting", "whatever", "Hello there."},
		{"out of scope response", d, OutOfScope, "whatever", "I can't help with that."},
		{"intent without response", d, "goodbye", "whatever", "Say that again?"},
		{"empty intent", d, "", "whatever", "Say that again?"},
		{"unknown intent", d, "launch_rocket", "whatever", "Say that again?"},
		{"no fallback in domain", noFallback, "", "whatever", DefaultFallback},
		{"no words heard", d, "", " ", NotHeard},
		{"no words heard, whatever the intent", d, "greeting", "", NotHeard},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, tt.d.Template(pipeline.Intent{Name: tt.intent, Confidence: 0.9}, tt.transcript))
		})
	}
}

func TestSentences(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"One.", []string{"One."}},
		{"It costs $4.99 today. Is it free? Yes! Done", []string{"It costs $4.99 today.", "Is it free?", "Yes!", "Done"}},
		{`He said "stop." Then left.`, []string{`He said "stop."`, "Then left."}},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, Sentences(tt.in), "input %q", tt.in)
	}
}

// The sample domain is what voiced ships and tests elsewhere rely on; it
// must keep the fixed intent names and the promised amount of content.
func TestIntentArticles(t *testing.T) {
	d, err := LoadFS(mapFS(map[string]string{
		IntentsFile: "intents:\n  - name: cards\n    articles: [gift-cards, hours]\n    examples: [gift card balance, do cards expire]\n" +
			"  - name: greeting\n    examples: [hi]\n",
		"articles/gift-cards.md": "# Gift cards\n\nThey never expire.\n\n## Balance\n\nCheck it online.\n",
		"articles/hours.md":      "# Hours\n\nNine to five.\n",
	}), "dom")
	require.NoError(t, err)
	require.Equal(t, []string{"gift-cards", "hours"}, d.IntentArticles("cards"))
	require.Nil(t, d.IntentArticles("greeting"))
	require.Nil(t, d.IntentArticles("nope"))
	require.Equal(t, []pipeline.Passage{
		{ID: "gift-cards#1", Title: "Gift cards", Text: "They never expire."},
		{ID: "gift-cards#2", Title: "Gift cards", Text: "Check it online."},
	}, d.Passages("gift-cards"))
	require.Nil(t, d.Passages("nope"))
	// The examples go with the first article only: they ask the intent's
	// usual question, and neither says the later article's title
	// (TestQuestionsGoToTheArticleTheyName).
	require.Equal(t, []string{"gift card balance", "do cards expire"}, d.Articles[0].Questions)
	require.Nil(t, d.Articles[1].Questions)
	// The classifier gets every linked article's title and keywords.
	cards, _ := d.Intent("cards")
	require.Equal(t, []string{"Gift cards", "Hours"}, cards.Phrases)
	greeting, _ := d.Intent("greeting")
	require.Nil(t, greeting.Phrases)
}

func TestIntentPhrases(t *testing.T) {
	d, err := LoadFS(mapFS(map[string]string{
		IntentsFile: "intents:\n  - name: swap\n    articles: [exchanges]\n    examples: [swap it, exchange this]\n" +
			"  - name: greeting\n    examples: [hi]\n",
		"articles/exchanges.md": "---\nkeywords: [trade, wrong size]\n---\n# Exchanges\n\nSwap in store.\n",
	}), "dom")
	require.NoError(t, err)
	in, _ := d.Intent("swap")
	require.Equal(t, []string{"Exchanges", "trade", "wrong size"}, in.Phrases)
	// Training keeps them, whatever the split leaves of the examples.
	tr, err := d.Training()
	require.NoError(t, err)
	in, _ = tr.Intent("swap")
	require.Equal(t, []string{"Exchanges", "trade", "wrong size"}, in.Phrases)
}

func TestDefaultDomain(t *testing.T) {
	d, err := Default()
	require.NoError(t, err)
	require.Empty(t, d.Dir)
	require.Empty(t, d.PronunciationsPath())
	names := []string{
		"order_status", "cancel_order", "return_item", "refund_status", "reset_password",
		"change_email", "shipping_options", "delivery_time", "payment_methods", "opening_hours",
		"store_location", "talk_to_human", "greeting", "goodbye", OutOfScope,
	}
	require.Len(t, d.Intents, len(names))
	for _, n := range names {
		in, ok := d.Intent(n)
		require.True(t, ok, n)
		require.GreaterOrEqual(t, len(in.Examples), 15, n)
		require.NotEmpty(t, in.Response, n)
		// Every intent that asks for information says where it is.
		if n != "greeting" && n != "goodbye" && n != OutOfScope {
			require.NotEmpty(t, in.Articles, n)
		}
	}
	require.GreaterOrEqual(t, len(d.Articles), 30)
	for _, a := range d.Articles {
		require.GreaterOrEqual(t, len(a.Paragraphs()), 2, a.ID)
	}

	corpus := d.CorpusSentences()
	require.Contains(t, corpus, "where's my package")
	require.Contains(t, corpus, "Standard shipping takes three to five business days.")
	for _, s := range corpus {
		require.False(t, strings.ContainsAny(s, "#*`\n"), "markup in corpus sentence %q", s)
	}

	cases, err := d.RetrievalEval()
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(cases), 50)
	spoken, err := d.RetrievalEvalFile(SpokenRetrievalEvalFile)
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(spoken), 30)
	for _, c := range spoken {
		// As the recogniser writes them.
		require.Equal(t, strings.ToLower(c.Question), c.Question)
		require.False(t, strings.ContainsAny(c.Question, ".,?!'"), c.Question)
	}
}

func TestRetrievalEvalErrors(t *testing.T) {
	base := map[string]string{IntentsFile: goodIntents, "articles/gift-cards.md": goodArticle}
	tests := []struct {
		name, eval string
		line       int
		message    string
	}{
		{"unknown article", "questions:\n  - question: q\n    expect: [gift-cards, nope]\n", 3, `unknown article "nope"`},
		{"no expectation", "questions:\n  - question: q\n", 2, "needs a question"},
		{"unknown field", "questions:\n  - question: q\n    expected: [gift-cards]\n", 3, "unknown field"},
		{"bad yaml", "questions:\n  - question: q\n    expect: a: b\n", 3, "invalid YAML"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			files := map[string]string{RetrievalEvalFile: tt.eval}
			for k, v := range base {
				files[k] = v
			}
			d, err := LoadFS(mapFS(files), "dom")
			require.NoError(t, err)
			_, err = d.RetrievalEval()
			requireDomainError(t, err, "dom/eval/retrieval.yaml", tt.line, tt.message)
		})
	}

	d, err := LoadFS(mapFS(base), "dom")
	require.NoError(t, err)
	_, err = d.RetrievalEval()
	require.True(t, errors.Is(err, fs.ErrNotExist))
}

func TestPassageID(t *testing.T) {
	for _, tc := range []struct {
		article string
		seq     int
		id      string
	}{
		{"gift-cards", 2, "gift-cards#2"},
		{"a#b", 10, "a#b#10"},
	} {
		require.Equal(t, tc.id, PassageID(tc.article, tc.seq))
		require.Equal(t, tc.article, ArticleOf(tc.id))
	}
	require.Equal(t, "no-hash", ArticleOf("no-hash"))
}

// KnownText holds the articles' titles, bodies and keywords and the class
// words: the domain's words that no intent example may say.
func TestKnownText(t *testing.T) {
	d, err := Default()
	require.NoError(t, err)
	all := strings.Join(d.KnownText(), "\n")
	for _, a := range d.Articles {
		require.Contains(t, all, a.Title)
		require.Contains(t, all, a.Body)
		for _, k := range a.Keywords {
			require.Contains(t, all, k)
		}
	}
	for class, words := range d.Classes {
		require.Contains(t, all, strings.Join(words, " "), class)
	}
}

// Punctuation alone is no words: the template asks again.
func TestTemplatePunctuationIsNotHeard(t *testing.T) {
	d, err := Default()
	require.NoError(t, err)
	for _, tr := range []string{".", "…", " ?! "} {
		require.Equal(t, NotHeard, d.Template(pipeline.Intent{Name: "out_of_scope"}, tr), "%q", tr)
	}
	require.NotEqual(t, NotHeard, d.Template(pipeline.Intent{Name: "out_of_scope"}, "7"))
}
