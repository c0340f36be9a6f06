// Package domain loads a voiced domain folder: the intents the classifier is
// trained on, with their spoken response templates, and the knowledge-base
// articles retrieval indexes. The same text is the corpus the speech
// recogniser's language model is built from, so every stage reads it from
// here. The folder format is documented in docs/domain.md.
package domain

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/voiced/voiced/domain/helpdesk"
	"github.com/voiced/voiced/internal/pipeline"
	"github.com/voiced/voiced/internal/stages/stt/lm"
)

// Files and folders of a domain, relative to its root.
const (
	IntentsFile        = "intents.yaml"
	ArticlesDir        = "articles"
	PronunciationsFile = "pronunciations.dict"
	RetrievalEvalFile  = "eval/retrieval.yaml"
	// SpokenRetrievalEvalFile is an optional second evaluation set of
	// short questions as the speech recogniser writes them (lower case,
	// no punctuation).
	SpokenRetrievalEvalFile = "eval/retrieval-spoken.yaml"
)

// OutOfScope is the intent name used when nothing fits. A domain may list it
// with examples of off-topic requests (it is then trained like any other
// intent) or with only a response.
const OutOfScope = "out_of_scope"

// DefaultFallback is said when the intent is unknown and the domain gives no
// fallback of its own.
const DefaultFallback = "Sorry, I didn't catch that. Could you say it another way?"

// NotHeard answers a transcript with no words: silence, or speech the
// recogniser had no time to make words of.
const NotHeard = "Sorry, I didn't catch that. Could you say it again?"

// Domain is a loaded domain folder.
type Domain struct {
	// Dir is the folder the domain was loaded from, "" when it was loaded
	// from an fs.FS such as the embedded sample.
	Dir string
	// Name names the domain in messages: the folder's base name or the name
	// given to LoadFS.
	Name string
	// Fallback is the response for an unknown intent.
	Fallback string
	Intents  []Intent
	Articles []Article
	// Classes are the word classes of the recogniser's domain language
	// model (classes/*.txt): class name to member words.
	Classes map[string][]string

	fsys  fs.FS
	where string // prefix of file names in errors
	// links are the intents' "articles" entries with their lines, checked
	// once the articles are loaded.
	links []articleLink
	// passages holds each article's passages, by article id.
	passages map[string][]pipeline.Passage
}

// articleLink is one entry of an intent's "articles" list.
type articleLink struct {
	intent, article string
	line            int
}

// Intent is one intent: its fixed name, the example phrasings it is trained
// on, its optional spoken response, and the ids of the articles that answer
// it (optional; every id is an article of the domain).
type Intent struct {
	Name     string
	Examples []string
	Response string
	Articles []string
	// Ungrounded intents ("grounded: false": greetings, goodbyes) are
	// answered by their response alone: no passage is quoted or cited.
	Ungrounded bool
	// Variants are extra training data for the classifier, each made from
	// one example (Transcript.Question): the recogniser's transcripts of
	// the examples spoken by synthetic voices (SpokenFile; Voice names the
	// voice), with the recogniser's mistakes in them. They are not part of
	// the recogniser's corpus.
	Variants []Transcript
	// Phrases are what the intent's linked articles say their subject is:
	// each article's title and keywords ("Exchanges for another size or
	// color", "swap", "wrong size"). The classifier trains on them in
	// every fold as extra documents of the intent (never scored), so a
	// caller's word the examples never use but an article's keywords do
	// still points to the intent. Set by the domain from the articles.
	Phrases []string
}

// Article is one knowledge-base article.
type Article struct {
	ID    string // file name without ".md", e.g. "gift-cards"
	Title string // text of the "# " heading
	Body  string // Markdown after the title
	Path  string // path inside the domain, e.g. "articles/gift-cards.md"
	// Questions are the example phrasings of the intents that list this
	// article first under "articles" (how callers ask what it answers),
	// less those that say a later listed article's title or keyword more,
	// and those of the intents that list it later which say its own more
	// (linkArticles). Retrieval indexes them with the article's first
	// passage.
	Questions []string
	// Keywords are the words and phrases callers use for what the article
	// answers, written from the article (its front matter; optional):
	// "swap" and "trade" for an article on exchanges. Retrieval indexes
	// them with every passage of the article, as it does the title. They
	// are not part of the recogniser's corpus: they are not sentences.
	Keywords []string
	// Classes name word classes (classes/*.txt) any word of which says
	// what the article is about, as a keyword would: "abroad" for an
	// article on shipping abroad, so that a caller who names a city no
	// keyword lists finds it (front matter; optional). ClassWords are
	// their words, filled in when the domain loads. Retrieval matches
	// each word on its own with the article's subject (see
	// retrieval.Config.SubjectWeight); listed as keywords, two dozen
	// city names would dilute the keyword column of every passage.
	Classes    []string
	ClassWords []string
}

// Error is a problem in a domain file. Line is 1-based; 0 when the problem
// concerns the whole file.
type Error struct {
	File string
	Line int
	Msg  string
}

func (e *Error) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
	}
	return fmt.Sprintf("%s: %s", e.File, e.Msg)
}

// Load loads the domain folder dir from disk. A malformed domain fails with
// an *Error naming the file and line.
func Load(dir string) (*Domain, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("load domain: %w", err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("load domain %s: not a directory", dir)
	}
	d, err := load(os.DirFS(dir), filepath.Base(filepath.Clean(dir)), dir)
	if err != nil {
		return nil, err
	}
	d.Dir = dir
	return d, nil
}

// LoadFS loads a domain whose files are at the root of fsys; name is used in
// messages (errors name files as name/intents.yaml and so on).
func LoadFS(fsys fs.FS, name string) (*Domain, error) {
	return load(fsys, name, name)
}

// LoadOrDefault loads the domain folder dir, or the embedded sample when dir
// is "": what a -domain flag means.
func LoadOrDefault(dir string) (*Domain, error) {
	if dir == "" {
		return Default()
	}
	return Load(dir)
}

// Default loads the embedded sample help-desk domain (domain/helpdesk).
func Default() (*Domain, error) {
	return LoadFS(helpdesk.FS, "helpdesk")
}

func load(fsys fs.FS, name, where string) (*Domain, error) {
	d := &Domain{Name: name, fsys: fsys, where: where}
	if err := d.loadIntents(); err != nil {
		return nil, fmt.Errorf("load domain %s: %w", name, err)
	}
	if err := d.loadArticles(); err != nil {
		return nil, fmt.Errorf("load domain %s: %w", name, err)
	}
	if err := d.loadClasses(); err != nil {
		return nil, fmt.Errorf("load domain %s: %w", name, err)
	}
	if err := d.loadSpoken(); err != nil {
		return nil, fmt.Errorf("load domain %s: %w", name, err)
	}
	if err := d.resolveArticleClasses(); err != nil {
		return nil, fmt.Errorf("load domain %s: %w", name, err)
	}
	if err := d.linkArticles(); err != nil {
		return nil, fmt.Errorf("load domain %s: %w", name, err)
	}
	return d, nil
}

// resolveArticleClasses gives each article the words of the classes its
// front matter names (Article.ClassWords); a class the domain does not
// have is an error in the article.
func (d *Domain) resolveArticleClasses() error {
	for i := range d.Articles {
		a := &d.Articles[i]
		a.ClassWords = nil
		for _, c := range a.Classes {
			words, ok := d.Classes[c]
			if !ok {
				return &Error{File: d.file(a.Path), Msg: fmt.Sprintf("front matter names class %q, which the domain does not have (classes/%s.txt)", c, c)}
			}
			a.ClassWords = append(a.ClassWords, words...)
		}
	}
	return nil
}

// linkArticles checks that every article an intent lists exists, and gives
// each article the examples of the intents that list it first (or, for an
// example that names a later listed article's subject, that article's)
// and each intent the titles and keywords of the articles it lists
// (Intent.Phrases).
func (d *Domain) linkArticles() error {
	byID := make(map[string]int, len(d.Articles))
	for i, a := range d.Articles {
		byID[a.ID] = i
	}
	for _, l := range d.links {
		if _, ok := byID[l.article]; !ok {
			return &Error{File: d.file(IntentsFile), Line: l.line, Msg: fmt.Sprintf("intent %q lists unknown article %q (want the name of a file in %s/ without .md)", l.intent, l.article, ArticlesDir)}
		}
	}
	var subj *subjects
	for _, l := range d.links {
		i := byID[l.article]
		// The intent's examples ask its usual question, which its first
		// article answers; the articles listed after it answer its rarer
		// questions, and the usual examples would only crowd their own
		// words. An example that says a later article's subject (its
		// title or a keyword: "my card got declined") more than the
		// first's asks one of the rarer questions, and goes with that
		// article (subjects.article).
		in, _ := d.Intent(l.intent)
		if l.article != in.Articles[0] {
			continue
		}
		if len(in.Articles) == 1 {
			d.Articles[i].Questions = append(d.Articles[i].Questions, in.Examples...)
			continue
		}
		if subj == nil {
			subj = newSubjects(d.Articles)
		}
		for _, ex := range in.Examples {
			j := byID[subj.article(ex, in.Articles)]
			d.Articles[j].Questions = append(d.Articles[j].Questions, ex)
		}
	}
	for i := range d.Intents {
		in := &d.Intents[i]
		in.Phrases = nil
		for _, id := range in.Articles {
			a := d.Articles[byID[id]]
			in.Phrases = append(in.Phrases, a.Title)
			in.Phrases = append(in.Phrases, a.Keywords...)
		}
	}
	// The extractive answer asks for the linked articles' passages with
	// every answer: split them once.
	d.passages = make(map[string][]pipeline.Passage, len(d.Articles))
	for _, a := range d.Articles {
		d.passages[a.ID] = articlePassages(a)
	}
	return nil
}

// IntentArticles returns the ids of the articles that answer the intent
// called name, as listed in intents.yaml; nil when it lists none or there
// is no such intent.
func (d *Domain) IntentArticles(name string) []string {
	in, _ := d.Intent(name)
	return in.Articles
}

// Grounded reports whether answers to the intent draw on the knowledge
// base: false for intents marked "grounded: false" (greetings, goodbyes),
// whose response is the whole answer; true for every other name, known or
// not. out_of_scope is grounded: the classifier also says it for a
// question no intent covers ("do gift cards expire"), which a strong
// retrieved passage answers.
func (d *Domain) Grounded(name string) bool {
	in, _ := d.Intent(name)
	return !in.Ungrounded
}

// Passages returns the passages of the article with the given id, as
// retrieval returns them (IDs "gift-cards#1", "gift-cards#2", ... and no
// score), or nil when there is no such article. The slice is shared: do
// not modify it.
func (d *Domain) Passages(id string) []pipeline.Passage {
	if d.passages != nil {
		return d.passages[id]
	}
	i := slices.IndexFunc(d.Articles, func(a Article) bool { return a.ID == id })
	if i < 0 {
		return nil
	}
	return articlePassages(d.Articles[i])
}

func articlePassages(a Article) []pipeline.Passage {
	var out []pipeline.Passage
	for j, p := range a.Paragraphs() {
		out = append(out, pipeline.Passage{ID: PassageID(a.ID, j+1), Title: a.Title, Text: p.Text})
	}
	return out
}

// file names a domain file in errors.
func (d *Domain) file(name string) string {
	if d.where == "" {
		return name
	}
	return path.Join(filepath.ToSlash(d.where), name)
}

func (d *Domain) loadArticles() error {
	names, err := fs.Glob(d.fsys, ArticlesDir+"/*.md")
	if err != nil {
		return fmt.Errorf("list articles: %w", err)
	}
	slices.Sort(names)
	for _, name := range names {
		if hidden(name) {
			continue
		}
		data, err := d.readText(name)
		if err != nil {
			return readError(err, "article")
		}
		a, err := parseArticle(d.file(name), name, data)
		if err != nil {
			return err
		}
		d.Articles = append(d.Articles, a)
	}
	return nil
}

// Intent returns the intent called name.
func (d *Domain) Intent(name string) (Intent, bool) {
	i := slices.IndexFunc(d.Intents, func(in Intent) bool { return in.Name == name })
	if i < 0 {
		return Intent{}, false
	}
	return d.Intents[i], true
}

// Template returns the spoken response of the intent, or the domain's
// fallback when the intent is unknown, empty or has no response; with no
// words in the transcript, NotHeard.
func (d *Domain) Template(in pipeline.Intent, transcript string) string {
	if pipeline.NoWords(transcript) {
		return NotHeard
	}
	if it, ok := d.Intent(in.Name); ok && it.Response != "" {
		return it.Response
	}
	if d.Fallback != "" {
		return d.Fallback
	}
	return DefaultFallback
}

var _ pipeline.Templater = (*Domain)(nil)

// Lexicon reads the recogniser's pronunciation dictionary at dictPath with
// the domain's pronunciations (PronunciationsFile, when it has one) over
// it: what the intent classifier looks up the sounds of words in
// (intent.Config.Lexicon).
func (d *Domain) Lexicon(dictPath string) (*lm.Lexicon, error) {
	prons, err := d.Pronunciations()
	if err != nil {
		return nil, err
	}
	return lm.ReadLexicon(dictPath, prons)
}

// Pronunciations parses the domain's pronunciations file
// (PronunciationsFile; none when it has none).
func (d *Domain) Pronunciations() ([]lm.Pronunciation, error) {
	data, err := d.ReadFile(PronunciationsFile)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return lm.ParsePronunciations(bytes.NewReader(data), d.file(PronunciationsFile))
}

// PronunciationsPath returns the path on disk of the domain's pronunciation
// dictionary, or "" when it has none or the domain was not loaded from disk
// (read it with ReadFile then).
func (d *Domain) PronunciationsPath() string {
	if d.Dir == "" {
		return ""
	}
	p := filepath.Join(d.Dir, PronunciationsFile)
	if st, err := os.Stat(p); err != nil || !st.Mode().IsRegular() {
		return ""
	}
	return p
}

// PronunciationsSource returns where the recogniser reads the domain's
// pronunciation dictionary from: its path on disk, or, for a domain not
// loaded from disk (the embedded one), its content. Both are empty when
// the domain has none.
func (d *Domain) PronunciationsSource() (path string, data []byte, err error) {
	if p := d.PronunciationsPath(); p != "" {
		return p, nil, nil
	}
	data, err = d.ReadFile(PronunciationsFile)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil, nil
	}
	return "", data, err
}

// ReadFile reads a text file of the domain by its path inside the folder,
// e.g. PronunciationsFile, without a byte-order mark; a missing file gives
// an error wrapping fs.ErrNotExist.
func (d *Domain) ReadFile(name string) ([]byte, error) {
	b, err := d.readText(name)
	if err != nil {
		return nil, fmt.Errorf("domain %s: %w", d.Name, err)
	}
	return b, nil
}

// MaxFileSize is the largest domain file voiced reads (the sample's
// largest, eval/tuning-nbest.tsv, is about 550 KB): a larger one is
// refused before it is read, so a wrong file cannot exhaust memory at
// startup.
const MaxFileSize = 16 << 20

// readText reads a text file of the domain, without the UTF-8 byte-order
// mark editors on Windows put first (which would make its first line
// unreadable). A missing file gives an error wrapping fs.ErrNotExist; a
// file that is not a regular file (a FIFO would block startup, a device
// such as /dev/zero would never end) or is larger than MaxFileSize, an
// *Error naming it; a file that is not UTF-8, an *Error naming the line
// of its first other byte.
func (d *Domain) readText(name string) ([]byte, error) {
	file := d.file(name)
	// Stat first: opening a FIFO blocks until something writes to it.
	st, err := fs.Stat(d.fsys, name)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, &Error{File: file, Msg: "not a regular file"}
	}
	tooBig := &Error{File: file, Msg: fmt.Sprintf("larger than the %d MiB a domain file may be", MaxFileSize>>20)}
	if st.Size() > MaxFileSize {
		return nil, tooBig
	}
	f, err := d.fsys.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if len(b) > MaxFileSize {
		return nil, tooBig // it grew since the Stat
	}
	// Every domain file is UTF-8 text (docs/domain.md): a Latin-1 byte
	// would otherwise be trained on, indexed or spoken as it is.
	if bad := invalidUTF8(b); bad >= 0 {
		return nil, &Error{File: file, Line: bytes.Count(b[:bad], []byte("\n")) + 1, Msg: "not UTF-8 text: save the file as UTF-8"}
	}
	return bytes.TrimPrefix(b, []byte("\ufeff")), nil
}

// readError is err from readText, reading a file of the domain of the
// kind what: an *Error as it is, else (an I/O error) prefixed.
func readError(err error, what string) error {
	if _, ok := errors.AsType[*Error](err); ok {
		return err
	}
	return fmt.Errorf("read %s: %w", what, err)
}

// hidden reports whether a file of the domain is hidden (".md",
// ".#gift-cards.md", the lock file Emacs keeps while it is edited, or
// "._gift-cards.md", macOS's resource fork in an archive): not an article
// or class.
func hidden(name string) bool { return strings.HasPrefix(path.Base(name), ".") }

// CorpusSentences returns everything a caller is expected to say or ask
// about: every intent example, and every article title, section heading and
// sentence, as plain text (Markdown removed), one sentence per element,
// without duplicates, in a stable order, followed by one lm.ClassLine
// ("@class product lamp sofa ...") per word class, sorted by name: the
// recogniser's domain language model is built from it (lm.ParseCorpus
// tells the two apart). Response templates are not included: callers do
// not say them.
func (d *Domain) CorpusSentences() []string {
	seen := make(map[string]bool)
	var out []string
	add := func(s string) {
		s = strings.TrimSpace(s)
		if s == "" || seen[s] {
			return
		}
		seen[s] = true
		out = append(out, s)
	}
	for _, in := range d.Intents {
		for _, ex := range in.Examples {
			add(ex)
		}
	}
	for _, a := range d.Articles {
		add(a.Title)
		lastHeading := ""
		for _, p := range a.Paragraphs() {
			if p.Heading != lastHeading {
				add(p.Heading)
				lastHeading = p.Heading
			}
			for _, s := range Sentences(p.Text) {
				add(s)
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(d.Classes)) {
		out = append(out, lm.ClassLine(name, d.Classes[name]))
	}
	return out
}

// KnownText returns the texts whose words are the domain's although no
// intent example says them: every article's title, keywords and body, and
// the words of every class (sorted by class name). The intent classifier
// counts a caller's word found in none of them, nor in its training data,
// as a sign the question is about something else ("is the pharmacy open").
func (d *Domain) KnownText() []string {
	var out []string
	for _, a := range d.Articles {
		out = append(out, a.Title, a.Body)
		out = append(out, a.Keywords...)
	}
	for _, name := range slices.Sorted(maps.Keys(d.Classes)) {
		out = append(out, strings.Join(d.Classes[name], " "))
	}
	return out
}
