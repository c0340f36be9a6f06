// Package retrieval is the retrieval stage of voiced: the domain's articles,
// split into passages by heading and paragraph, indexed at startup in SQLite
// FTS5 (the pure-Go modernc.org/sqlite driver) with Porter stemming, and
// ranked with BM25.
//
// Queries honour their context: the driver interrupts a statement still
// running when the context ends (sqlite3_interrupt), so a query at its
// budget's end stops instead of running on unobserved. User text never
// reaches FTS5 as query syntax: it is cut into words, and each word is
// passed as a quoted string. Function words are left out of the query, and
// so are words whose stem is in more than a third of the passages
// (Config.CommonFraction) while enough other words remain: past half BM25
// weighs them at almost zero, so they cannot change the ranking but make a
// query score most of the index; from a third they weigh little, yet
// callers say them in most questions ("days", "shipping"), and their small
// weights add up to outrank the article of the caller's rarer words. A
// short spoken query may have few other words ("cancel my order" in a shop
// where "order" is everywhere), so when fewer than Config.MinTerms are left
// the common words are searched for too, rather than ranking by one word
// or none; and when the others find none of the articles whose subject
// the caller named (a city of a class, in no passage), every word is
// searched for.
//
// An article's questions (domain.Article.Questions: the examples of the
// intents that list it first, or later when an example names its
// subject) are indexed with its first passage, in a
// column of their own, because callers word a question more like those
// examples than like the article. When a query is still shorter than MinTerms, its
// question words ("where", "when", ...) are searched for in that column
// only: "where is my order" is otherwise a search for "order", a word in
// half of a shop's passages, while "where" is how callers ask for an
// order's status. In article text question words are rare and random, so
// they are never searched for there.
//
// An article's keywords (domain.Article.Keywords, from its front matter:
// the words callers use for its subject, such as "trade" for exchanges)
// are indexed with every passage of it, as its title is. Fillers ("um",
// "like", "wanna") are left out of queries like function words, and two
// words the articles write as one ("pick up", "pickup") are searched as
// one too. When the words outside the common ones find fewer than k
// passages (they are words no article uses), a wider query searches every
// word and the question words among the questions.
package retrieval

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/google/uuid"
	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver

	"github.com/voiced/voiced/internal/domain"
	"github.com/voiced/voiced/internal/pipeline"
)

// Config configures an Index. The zero value means the defaults below.
type Config struct {
	// Path is the SQLite database file the index is built in; it is
	// rebuilt at every Open, in a new file beside it renamed over it, so
	// servers sharing the path never write to a file another one reads:
	// each keeps reading the file it built and opened, even once another
	// has replaced it or it was deleted. A symbolic link is followed: its
	// target is rebuilt. Build files a crashed build left beside it are
	// removed once an hour old. "" (the default) keeps the index in
	// memory.
	Path string
	// MaxConns bounds the connections, and so the queries running at once.
	// Default 4.
	MaxConns int
	// MaxTerms bounds the words of a query that are searched for, so a long
	// transcript cannot make a slow query. Default 24.
	MaxTerms int
	// MinTerms is how many words a query keeps before it gives up leaving
	// out the words in most passages: below it, they are searched for too,
	// so a short question is not left with nothing to rank by. (Function
	// words stay out: they are rare in articles, so BM25 would weigh them
	// heavily. A query made only of them searches for nothing.) Default 2.
	MinTerms int
	// CommonFraction: a word whose stem is in more than this fraction of
	// the passages is common, and left out of queries while MinTerms
	// others remain. Default DefaultCommonFraction; at most 1.
	CommonFraction float64
	// TitleWeight and HeadingWeight are the BM25 weights of a passage's
	// article title and section heading, relative to its text (1).
	// Defaults 2 and 1.5.
	TitleWeight, HeadingWeight float64
	// QuestionWeight is the BM25 weight of the questions indexed with an
	// article's first passage (domain.Article.Questions: the examples of
	// the intents that list the article first, or later when an example
	// names its subject). Default 0.5.
	QuestionWeight float64
	// KeywordWeight is the BM25 weight of an article's keywords
	// (domain.Article.Keywords), indexed with each of its passages.
	// Default 1.
	KeywordWeight float64
	// SubjectWeight weighs an article's subject score, added to each of
	// its passages' scores: the best BM25 of the query's uncommon words
	// against the article's title and its keywords, each phrase indexed
	// alone. In the passage's own BM25 the keywords are one column of a
	// long row, so a rare keyword the caller said ("customs") counted for
	// less than a common word in a short title ("pay"). Default
	// DefaultSubjectWeight; negative: none.
	SubjectWeight float64
}

// Defaults of Config.
const (
	DefaultMaxConns       = 4
	DefaultMaxTerms       = 24
	DefaultMinTerms       = 2
	DefaultTitleWeight    = 2
	DefaultHeadingWeight  = 1.5
	DefaultQuestionWeight = 0.5
	DefaultKeywordWeight  = 1
	DefaultSubjectWeight  = 0.25
	// DefaultCommonFraction was a half, past which BM25 weighs a word at
	// almost nothing (FTS5 clamps its IDF to 1e-6). Words in a third to a
	// half of a help desk's passages ("days" and "shipping" are in 35 of
	// the sample's 101) still weigh something, and callers say them in
	// most questions, so they add up for passages that happen to say
	// them and outrank the article of the caller's rarer words: "how many
	// days do i have to return something" ranked "Changing an order" and
	// "Delivery times" above "Return policy". Chosen on the tuning sets
	// (evalretrieval -heldout=false -common-fraction F): first sources of
	// 602, 492 from a half down to 0.36, 498 from 0.34 to 0.28, 497 at a
	// quarter, 490 at a fifth; docs/benchmarks.md, "The first source,
	// fourteenth session".
	DefaultCommonFraction = 1.0 / 3
)

func (c Config) withDefaults() Config {
	if c.MaxConns <= 0 {
		c.MaxConns = DefaultMaxConns
	}
	if c.MaxTerms <= 0 {
		c.MaxTerms = DefaultMaxTerms
	}
	if c.MinTerms <= 0 {
		c.MinTerms = DefaultMinTerms
	}
	if c.TitleWeight <= 0 {
		c.TitleWeight = DefaultTitleWeight
	}
	if c.HeadingWeight <= 0 {
		c.HeadingWeight = DefaultHeadingWeight
	}
	if c.QuestionWeight <= 0 {
		c.QuestionWeight = DefaultQuestionWeight
	}
	if c.KeywordWeight <= 0 {
		c.KeywordWeight = DefaultKeywordWeight
	}
	if c.CommonFraction <= 0 || c.CommonFraction > 1 {
		c.CommonFraction = DefaultCommonFraction
	}
	if c.SubjectWeight == 0 {
		c.SubjectWeight = DefaultSubjectWeight
	}
	return c
}

// RegisterFlags registers the -retrieval.* flags that set c.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.Path, "retrieval.index", "", "SQLite file the knowledge-base index is built in at startup (default: in memory); built beside it and renamed into place, so servers may share the path: each keeps the index it built")
	fs.IntVar(&c.MaxConns, "retrieval.max-conns", 0, fmt.Sprintf("retrieval queries running at once (0: %d)", DefaultMaxConns))
}

// Index is a full-text index of passages. It is safe for concurrent use.
type Index struct {
	cfg   Config
	db    *sql.DB
	pin   *sql.Conn // keeps an in-memory database alive
	query *sql.Stmt
	// subjectQuery scores the articles' subject phrases
	// (Config.SubjectWeight); nil when the weight is negative.
	subjectQuery *sql.Stmt
	passages     int
	// common holds the corpus words whose stem is in more than
	// Config.CommonFraction of the passages. Past half, BM25 gives such a
	// term an IDF of almost zero (FTS5 clamps it to 1e-6), so it cannot
	// change the ranking, yet it is the costliest part of a query: every
	// passage it matches must be scored. Queries leave these words out.
	common map[string]bool
	// vocab holds every word of the indexed text, as written.
	vocab map[string]bool
}

var _ pipeline.Retriever = (*Index)(nil)

// subjectSchema indexes each article's title and each of its keywords as
// a phrase of its own (Config.SubjectWeight): short rows, so a phrase's
// score does not depend on how many keywords its article has.
const subjectSchema = `CREATE VIRTUAL TABLE subject USING fts5(
	phrase, article_id UNINDEXED,
	tokenize = 'porter unicode61 remove_diacritics 2'
)`

const schema = `CREATE VIRTUAL TABLE passage USING fts5(
	title, heading, body, questions, keywords,
	article_id UNINDEXED, seq UNINDEXED,
	tokenize = 'porter unicode61 remove_diacritics 2'
)`

// Open builds the index of articles: one passage per paragraph, with the
// article title and section heading indexed alongside, and the article's
// questions with its first passage. Callers word a question the way the
// questions are worded more often than the way the article is ("where is
// my order" against "Tracking your order"); one passage, not all, holds
// them so they count once per article.
func Open(ctx context.Context, cfg Config, articles []domain.Article) (*Index, error) {
	cfg = cfg.withDefaults()
	ix := &Index{cfg: cfg}
	if err := ix.open(ctx, articles); err != nil {
		ix.Close()
		return nil, err
	}
	return ix, nil
}

// open builds the index of articles in memory or in its file, and
// prepares its queries.
func (ix *Index) open(ctx context.Context, articles []domain.Article) error {
	cfg := ix.cfg
	if cfg.Path == "" {
		// memdb shares one in-memory database among the pool's
		// connections, under a name unique to this index.
		db, err := sql.Open("sqlite", "file:/voiced-retrieval-"+uuid.NewString()+"?vfs=memdb")
		if err != nil {
			return fmt.Errorf("retrieval: open: %w", err)
		}
		ix.db = db
		db.SetMaxOpenConns(cfg.MaxConns + 1) // + the pinned connection
		db.SetMaxIdleConns(cfg.MaxConns + 1)
		if ix.pin, err = db.Conn(ctx); err != nil {
			return fmt.Errorf("retrieval: connect: %w", err)
		}
		if err := ix.build(ctx, ix.pin, articles); err != nil {
			return err
		}
	} else {
		path, err := indexFile(cfg.Path)
		if err != nil {
			return err
		}
		if err := ix.buildFile(ctx, path, articles); err != nil {
			return err
		}
		db, err := sql.Open("sqlite", readDSN(path))
		if err != nil {
			return fmt.Errorf("retrieval: open: %w", err)
		}
		ix.db = db
		db.SetMaxOpenConns(cfg.MaxConns)
		db.SetMaxIdleConns(cfg.MaxConns)
		// Every connection is opened now and kept (no lifetime, as many
		// idle as open): one opened later would read whatever file the
		// path names then, another server's index or none.
		if err := connectAll(ctx, db, cfg.MaxConns); err != nil {
			return err
		}
	}
	passages := fmt.Sprintf("bm25(passage, %g, %g, 1.0, %g, %g)", cfg.TitleWeight, cfg.HeadingWeight, cfg.QuestionWeight, cfg.KeywordWeight)
	var err error
	ix.query, err = ix.db.PrepareContext(ctx, `SELECT article_id, seq, title, body, `+passages+` AS score
		FROM passage WHERE passage MATCH ?1 ORDER BY score LIMIT ?2`)
	if err != nil {
		return fmt.Errorf("retrieval: prepare query: %w", err)
	}
	if cfg.SubjectWeight > 0 {
		ix.subjectQuery, err = ix.db.PrepareContext(ctx, `SELECT article_id, bm25(subject) FROM subject WHERE subject MATCH ?1`)
		if err != nil {
			return fmt.Errorf("retrieval: prepare query: %w", err)
		}
	}
	return nil
}

// maxLinks bounds the symbolic links followed to an index file, as the
// kernel bounds them (40 on Linux).
const maxLinks = 40

// indexFile is the file the index at path is built into. A symbolic
// link's target is the index, whether or not it exists yet: built beside
// it and renamed over it, the link left in place. Renamed over the link
// instead, the build replaced the link with a file.
func indexFile(path string) (string, error) {
	if p, err := filepath.EvalSymlinks(path); err == nil {
		return p, nil
	}
	// A link to nothing yet (EvalSymlinks wants the whole chain to
	// exist): follow it by hand, a relative target from its link's
	// directory.
	link := path
	for range maxLinks {
		fi, err := os.Lstat(path)
		if err != nil || fi.Mode().Type() != os.ModeSymlink {
			return path, nil
		}
		dest, err := os.Readlink(path)
		if err != nil {
			return "", fmt.Errorf("retrieval: index: %w", err)
		}
		if !filepath.IsAbs(dest) {
			dest = filepath.Join(filepath.Dir(path), dest)
		}
		path = dest
	}
	return "", fmt.Errorf("retrieval: index %s: more than %d symbolic links", link, maxLinks)
}

// connectAll opens n connections of db and leaves them idle in its pool.
func connectAll(ctx context.Context, db *sql.DB, n int) error {
	conns := make([]*sql.Conn, 0, n)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range n {
		c, err := db.Conn(ctx)
		if err != nil {
			return fmt.Errorf("retrieval: connect: %w", err)
		}
		conns = append(conns, c)
	}
	return nil
}

// fileURI is the SQLite URI of the file at path.
func fileURI(path string) string {
	// SQLite reads the DSN as a URI: escape what would end the path.
	escaped := strings.NewReplacer("%", "%25", "?", "%3F", "#", "%23").Replace(path)
	if strings.HasPrefix(escaped, "/") {
		// An empty authority: "file://host/..." would read the start of
		// a path such as "//srv/index.db" as a host, and refuse it.
		escaped = "//" + escaped
	}
	return "file:" + escaped
}

// readDSN opens a built index file for queries. mode=ro: a file gone is
// an error, not a new, empty database. immutable: nothing writes to it
// once it is renamed into place, so no locks are taken and no journal or
// WAL beside it (another server's, or an older voiced's) is read.
func readDSN(path string) string {
	return fileURI(path) + "?mode=ro&immutable=1"
}

// buildFile builds the index in a new file beside path and renames it
// into place. Servers sharing the path never write to a file another one
// reads: those keep the file they opened (and its index) when a newer
// one replaces it at the path.
func (ix *Index) buildFile(ctx context.Context, path string, articles []domain.Article) (err error) {
	removeStaleBuilds(path)
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("retrieval: build: %w", err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			os.Remove(tmp)
		}
	}()
	if err := f.Close(); err != nil {
		return fmt.Errorf("retrieval: build: %w", err)
	}
	db, err := sql.Open("sqlite", fileURI(tmp))
	if err != nil {
		return fmt.Errorf("retrieval: open: %w", err)
	}
	defer db.Close() // a no-op after the Close below
	c, err := db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("retrieval: connect: %w", err)
	}
	if err := ix.build(ctx, c, articles); err != nil {
		c.Close()
		return err
	}
	if err := errors.Join(c.Close(), db.Close()); err != nil {
		return fmt.Errorf("retrieval: build: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("retrieval: build: %w", err)
	}
	return nil
}

// staleBuild is the age (since its last write) past which a build file
// beside the index is a crashed build's. Age rather than a lock: another
// server sharing the path may be building now, and SQLite holds its
// locks only during each transaction; a build writes continuously and
// takes seconds, so an hour without a write is none still running.
const staleBuild = time.Hour

// removeStaleBuilds removes the build files (and their SQLite journals)
// that a server killed while building left beside path: they were
// never removed, each one the size of an index. Best effort: a file
// another server removes first, or one that cannot be read, is left.
func removeStaleBuilds(path string) {
	dir, prefix := filepath.Dir(path), "."+filepath.Base(path)+"."
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		name := e.Name()
		if !strings.HasPrefix(name, prefix) || !(strings.HasSuffix(name, ".tmp") || strings.HasSuffix(name, ".tmp-journal")) {
			continue
		}
		if fi, err := e.Info(); err == nil && fi.Mode().IsRegular() && time.Since(fi.ModTime()) > staleBuild {
			os.Remove(filepath.Join(dir, name))
		}
	}
}

// build indexes articles on c, and learns the words in common
// (findCommon).
func (ix *Index) build(ctx context.Context, c *sql.Conn, articles []domain.Article) error {
	if err := ix.buildTables(ctx, c, articles); err != nil {
		return err
	}
	return ix.findCommon(ctx, c, articles)
}

func (ix *Index) buildTables(ctx context.Context, c *sql.Conn, articles []domain.Article) error {
	tx, err := c.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("retrieval: build: %w", err)
	}
	defer tx.Rollback() // a no-op after Commit
	if _, err := tx.ExecContext(ctx, schema); err != nil {
		return fmt.Errorf("retrieval: build: %w", err)
	}
	if _, err := tx.ExecContext(ctx, subjectSchema); err != nil {
		return fmt.Errorf("retrieval: build: %w", err)
	}
	subj, err := tx.PrepareContext(ctx, `INSERT INTO subject (phrase, article_id) VALUES (?, ?)`)
	if err != nil {
		return fmt.Errorf("retrieval: build: %w", err)
	}
	defer subj.Close()
	for _, a := range articles {
		// A class's words are phrases of the subject one by one: a
		// caller names one city, not the class.
		for _, phrase := range slices.Concat([]string{a.Title}, a.Keywords, a.ClassWords) {
			if _, err := subj.ExecContext(ctx, phrase, a.ID); err != nil {
				return fmt.Errorf("retrieval: index article %s: %w", a.ID, err)
			}
		}
	}
	ins, err := tx.PrepareContext(ctx, `INSERT INTO passage (title, heading, body, questions, keywords, article_id, seq) VALUES (?, ?, ?, ?, ?, ?, ?)`)
	if err != nil {
		return fmt.Errorf("retrieval: build: %w", err)
	}
	defer ins.Close()
	for _, a := range articles {
		keywords := strings.Join(a.Keywords, "\n")
		for i, p := range a.Paragraphs() {
			questions := ""
			if i == 0 {
				questions = strings.Join(a.Questions, "\n")
			}
			if _, err := ins.ExecContext(ctx, a.Title, p.Heading, p.Text, questions, keywords, a.ID, i+1); err != nil {
				return fmt.Errorf("retrieval: index article %s: %w", a.ID, err)
			}
			ix.passages++
		}
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO passage(passage) VALUES ('optimize')`); err != nil {
		return fmt.Errorf("retrieval: optimize: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("retrieval: build: %w", err)
	}
	return nil
}

// findCommon fills ix.vocab with every word of the indexed text and
// ix.common with those whose stem is in more than Config.CommonFraction of
// the passages. FTS5 stems words with its Porter tokenizer, which Go cannot
// call, so the corpus words are run through the same tokenizer in a
// scratch FTS5 table to learn each word's stem; fts5vocab then gives each
// stem's passage count.
func (ix *Index) findCommon(ctx context.Context, c *sql.Conn, articles []domain.Article) error {
	surface := corpusWords(articles)
	ix.vocab = make(map[string]bool, len(surface))
	for _, w := range surface {
		ix.vocab[w] = true
	}
	ix.common = make(map[string]bool)
	if ix.passages < 2 {
		return nil
	}
	common, err := commonWords(ctx, c, surface, ix.cfg.CommonFraction*float64(ix.passages))
	if err != nil {
		return fmt.Errorf("retrieval: term statistics: %w", err)
	}
	ix.common = common
	return nil
}

// corpusWords returns the distinct words of the indexed text, in the order
// first seen: of the articles that have passages (the others are not
// indexed), the title, questions and keywords once per article (not once
// per passage) and each passage's heading and text.
func corpusWords(articles []domain.Article) []string {
	var surface []string
	seen := make(map[string]bool)
	add := func(text string) {
		for _, w := range words(text) {
			if !seen[w] {
				seen[w] = true
				surface = append(surface, w)
			}
		}
	}
	for _, a := range articles {
		ps := a.Paragraphs()
		if len(ps) == 0 {
			continue
		}
		add(a.Title + " " + strings.Join(a.Questions, " ") + " " + strings.Join(a.Keywords, " "))
		for _, p := range ps {
			add(p.Heading + " " + p.Text)
		}
	}
	return surface
}

// stemTables are the scratch tables commonWords makes on the connection:
// the words to stem, their stems, and the passage table's stems with
// their passage counts.
var stemTables = []struct{ name, create string }{
	{"temp.stems", `CREATE VIRTUAL TABLE temp.stems USING fts5(w, tokenize = 'porter unicode61 remove_diacritics 2')`},
	{"temp.stems_vocab", `CREATE VIRTUAL TABLE temp.stems_vocab USING fts5vocab('temp', 'stems', 'instance')`},
	{"temp.passage_vocab", `CREATE VIRTUAL TABLE temp.passage_vocab USING fts5vocab('main', 'passage', 'row')`},
}

// commonWords returns the words of surface whose stem is in more than
// limit passages, learnt in scratch tables on c that are dropped before it
// returns (once they were all made).
func commonWords(ctx context.Context, c *sql.Conn, surface []string, limit float64) (_ map[string]bool, err error) {
	for _, t := range stemTables {
		if _, err := c.ExecContext(ctx, t.create); err != nil {
			return nil, err
		}
	}
	defer func() {
		// Dropped even when ctx has ended: the connection outlives it.
		for _, t := range slices.Backward(stemTables) {
			if _, dropErr := c.ExecContext(context.WithoutCancel(ctx), "DROP TABLE IF EXISTS "+t.name); err == nil {
				err = dropErr
			}
		}
	}()
	if err := insertWords(ctx, c, surface); err != nil {
		return nil, err
	}
	return wordsInMoreThan(ctx, c, surface, limit)
}

// insertWords writes surface into temp.stems in one transaction, the
// rowid of each word its index in surface plus one.
func insertWords(ctx context.Context, c *sql.Conn, surface []string) error {
	tx, err := c.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() // a no-op after Commit
	ins, err := tx.PrepareContext(ctx, `INSERT INTO temp.stems (rowid, w) VALUES (?, ?)`)
	if err != nil {
		return err
	}
	defer ins.Close()
	for i, w := range surface {
		if _, err := ins.ExecContext(ctx, i+1, w); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// wordsInMoreThan returns the words of surface (as insertWords wrote them)
// whose stem is in more than limit passages.
func wordsInMoreThan(ctx context.Context, c *sql.Conn, surface []string, limit float64) (map[string]bool, error) {
	rows, err := c.QueryContext(ctx, `SELECT s.doc FROM temp.stems_vocab AS s
		JOIN temp.passage_vocab AS p ON p.term = s.term WHERE p.doc > ?`, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	common := make(map[string]bool)
	for rows.Next() {
		var i int
		if err := rows.Scan(&i); err != nil {
			return nil, err
		}
		common[surface[i-1]] = true
	}
	return common, rows.Err()
}

// Len returns the number of indexed passages.
func (ix *Index) Len() int { return ix.passages }

// Retrieve returns the k passages that best match query, best first. A
// query with no searchable words (empty, punctuation, only function
// words), or k <= 0, returns no passages and no error. When ctx ends first,
// the running statement is interrupted and the error wraps ctx.Err().
func (ix *Index) Retrieve(ctx context.Context, query string, k int) ([]pipeline.Passage, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("retrieval: %w", err)
	}
	ws, err := wordsWithin(ctx, query)
	if err != nil {
		return nil, fmt.Errorf("retrieval: %w", err)
	}
	ws = joinCompounds(ws, ix.vocab)
	match, wider := queryExpr(ws, ix.cfg.MaxTerms, ix.cfg.MinTerms, ix.common)
	if match == "" || k <= 0 {
		return nil, nil
	}
	subject := subjectExpr(ws, ix.cfg.MaxTerms, ix.common)
	out, named, err := ix.run(ctx, match, subject, k)
	if err == nil && (len(out) < k || !named) && wider != "" {
		// The rarer words found (almost) nothing: they are words the
		// articles do not use ("where's the table lamp i ordered"), and
		// the common ones are all that is left to rank by. Or they found
		// none of the articles the caller named (a class word, "dublin",
		// is in no passage): the words they did find ("sofa", among an
		// unrelated article's questions) are not what was asked about.
		out, _, err = ix.run(ctx, wider, subject, k)
	}
	return out, err
}

// run runs one match expression, with subject matched against the
// articles' subjects, and returns its best k passages; named is false when
// subject matched an article and none of them is the article of a
// candidate it re-ranked.
func (ix *Index) run(ctx context.Context, match, subject string, k int) (_ []pipeline.Passage, named bool, err error) {
	var subjects map[string]float64
	if subject != "" && ix.subjectQuery != nil {
		if subjects, err = ix.subjects(ctx, subject); err != nil {
			return nil, false, err
		}
	}
	if len(subjects) == 0 {
		found, err := ix.bestPassages(ctx, match, k)
		return passagesOf(found), true, err
	}
	// The subject scores re-rank BM25's best candidates: a passage
	// outside them is not promoted, and the passage query stays one
	// query that sorts a few rows (a join in SQL doubled its p99 on a
	// thousand articles).
	found, err := ix.bestPassages(ctx, match, k*subjectCandidates)
	if err != nil {
		return nil, false, err
	}
	for i := range found {
		s, ok := subjects[found[i].article]
		named = named || ok
		found[i].Score += ix.cfg.SubjectWeight * s
	}
	// Stable: equal scores keep BM25's order.
	slices.SortStableFunc(found, func(a, b candidate) int { return cmp.Compare(b.Score, a.Score) })
	return passagesOf(found[:min(k, len(found))]), named, nil
}

// subjectCandidates is how many passages per one asked for the subject
// scores re-rank (Index.run).
const subjectCandidates = 8

// candidate is a passage found, with its article.
type candidate struct {
	pipeline.Passage
	article string
}

func passagesOf(cs []candidate) []pipeline.Passage {
	if cs == nil {
		return nil
	}
	out := make([]pipeline.Passage, len(cs))
	for i, c := range cs {
		out[i] = c.Passage
	}
	return out
}

// bestPassages runs one match expression and returns its best k passages,
// best first.
func (ix *Index) bestPassages(ctx context.Context, match string, k int) ([]candidate, error) {
	rows, err := ix.query.QueryContext(ctx, match, k)
	if err != nil {
		return nil, ix.queryError(ctx, err)
	}
	defer rows.Close()
	out := make([]candidate, 0, min(k, 16)) // k comes from configuration; do not trust it with memory
	for rows.Next() {
		var (
			c    candidate
			seq  int
			bm25 float64
		)
		if err := rows.Scan(&c.article, &seq, &c.Title, &c.Text, &bm25); err != nil {
			return nil, ix.queryError(ctx, err)
		}
		c.ID = domain.PassageID(c.article, seq)
		c.Score = -bm25 // SQLite's bm25 is lower for better matches
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, ix.queryError(ctx, err)
	}
	return out, nil
}

// subjects returns the subject score of each article whose title or a
// keyword matches subject: its best phrase's BM25, positive.
func (ix *Index) subjects(ctx context.Context, subject string) (map[string]float64, error) {
	rows, err := ix.subjectQuery.QueryContext(ctx, subject)
	if err != nil {
		return nil, ix.queryError(ctx, err)
	}
	defer rows.Close()
	out := make(map[string]float64)
	for rows.Next() {
		var (
			article string
			bm25    float64
		)
		if err := rows.Scan(&article, &bm25); err != nil {
			return nil, ix.queryError(ctx, err)
		}
		out[article] = max(out[article], -bm25)
	}
	if err := rows.Err(); err != nil {
		return nil, ix.queryError(ctx, err)
	}
	return out, nil
}

// queryError reports a failed query; when ctx ended, that is the cause
// (the driver's own error is then "interrupted").
func (ix *Index) queryError(ctx context.Context, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil && !errors.Is(err, ctxErr) {
		return fmt.Errorf("retrieval: query: %w (%w)", ctxErr, err)
	}
	return fmt.Errorf("retrieval: query: %w", err)
}

// Close releases the index; an in-memory index is gone afterwards.
func (ix *Index) Close() error {
	var errs []error
	if ix.query != nil {
		errs = append(errs, ix.query.Close())
	}
	if ix.subjectQuery != nil {
		errs = append(errs, ix.subjectQuery.Close())
	}
	if ix.pin != nil {
		errs = append(errs, ix.pin.Close())
	}
	if ix.db != nil { // nil when Open failed before it
		errs = append(errs, ix.db.Close())
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("retrieval: close: %w", err)
	}
	return nil
}

// MatchExpr turns user text into an FTS5 match expression that is never
// interpreted as query syntax: the text is cut into words of letters and
// digits (as FTS5's unicode61 tokenizer does), common function words and
// single letters are dropped, and each remaining word, at most maxTerms of them, becomes a
// quoted string; the strings are ORed so BM25 ranks partial matches. It
// returns "" when no word is left.
func MatchExpr(text string, maxTerms int) string {
	return orTerms(terms(words(text), maxTerms, nil))
}

// queryExpr returns the match expression Retrieve runs: the words ws
// without function words and the words in common, unless fewer than
// minTerms would be left; then the common words are searched for too. BM25
// weighs them at almost nothing, so they rank ties rather than decide. If
// that is still fewer than minTerms (but some), the question words of ws
// are searched for in the questions column. Every word is a quoted string
// and the column name is ours: nothing of the caller's text is read as
// syntax.
//
// wider is the expression for a query whose words outside the common ones
// match fewer than k passages: every word, and the question words in the
// questions column; "" when match already searches every word.
func queryExpr(ws []string, maxTerms, minTerms int, common map[string]bool) (match, wider string) {
	all := terms(ws, maxTerms, nil)
	if len(all) == 0 {
		return "", ""
	}
	wider = orTerms(all)
	if qs := questionWords(ws); len(qs) > 0 {
		wider += " OR questions : (" + orTerms(qs) + ")"
	}
	ts := terms(ws, maxTerms, common)
	switch {
	case len(ts) < minTerms && len(all) < minTerms:
		return wider, ""
	case len(ts) < minTerms:
		match = orTerms(all)
	default:
		match = orTerms(ts)
	}
	if match == wider {
		// No common word was left out and no question word is asked:
		// the wider query would be this one again.
		wider = ""
	}
	return match, wider
}

// subjectExpr is the match expression run against the articles'
// subjects: the words ws without function words and the words in common,
// without column filters (the subject table has no questions column). ""
// when only common words are left: they say little about a subject
// ("so about my order"), and the passages alone rank them.
func subjectExpr(ws []string, maxTerms int, common map[string]bool) string {
	return orTerms(terms(ws, maxTerms, common))
}

// joinCompounds adds, after two words a caller says apart (or the
// recogniser writes apart), the one word the articles make of them
// ("pick up" and "pickup", "check out" and "checkout"): apart, the second
// is often a function word and left out, and the first means something
// else.
func joinCompounds(ws []string, vocab map[string]bool) []string {
	out := make([]string, 0, len(ws))
	for i, w := range ws {
		out = append(out, w)
		// Single letters are left alone: "i d" (from "i'd") is no "id".
		if i+1 < len(ws) && len(w) > 1 && len(ws[i+1]) > 1 && vocab[w+ws[i+1]] {
			out = append(out, w+ws[i+1])
		}
	}
	return out
}

// questionWords returns the distinct question words of ws.
func questionWords(ws []string) []string {
	var qs []string
	for _, w := range ws {
		if interrogatives[w] && !slices.Contains(qs, w) {
			qs = append(qs, w)
		}
	}
	return qs
}

// terms returns the distinct words of ws, at most maxTerms of them, without
// function words, single letters and the words in skip.
func terms(ws []string, maxTerms int, skip map[string]bool) []string {
	// It holds the words kept: sized by the text, a megabyte's map took
	// tens of milliseconds to make.
	seen := make(map[string]bool, min(len(ws), maxTerms))
	var out []string
	for _, w := range ws {
		// Single letters are the debris of contractions ("i'm") and
		// spoken times ("p m"): they match much and mean little.
		if stopWords[w] || seen[w] || skip[w] || (len(w) == 1 && !unicode.IsDigit(rune(w[0]))) {
			continue
		}
		if len(out) == maxTerms {
			break
		}
		seen[w] = true
		out = append(out, w)
	}
	return out
}

// orTerms ORs the terms as quoted strings, so BM25 ranks partial matches.
func orTerms(ts []string) string {
	var b strings.Builder
	for i, w := range ts {
		if i > 0 {
			b.WriteString(" OR ")
		}
		// Words hold no quotes; doubling them anyway keeps the string
		// literal closed whatever the split above lets through.
		b.WriteString(`"` + strings.ReplaceAll(w, `"`, `""`) + `"`)
	}
	return b.String()
}

// words cuts text into lower-case words of letters and digits.
func words(text string) []string {
	return strings.FieldsFunc(strings.ToLower(text), notInWord)
}

// wordsWithin is words of a query, stopped with ctx's error when it ends:
// a huge transcript's words take a while to cut (some 60 ms a megabyte),
// and its stage may have been given up meanwhile.
func wordsWithin(ctx context.Context, text string) ([]string, error) {
	var out []string
	for w := range strings.FieldsFuncSeq(strings.ToLower(text), notInWord) {
		if len(out)%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		out = append(out, w)
	}
	return out, nil
}

func notInWord(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }

// interrogatives are the question words a short query looks for among the
// articles' questions ("wheres" is what the recogniser makes of "where's").
var interrogatives = map[string]bool{"where": true, "wheres": true, "when": true, "how": true, "what": true, "whats": true, "why": true, "who": true, "which": true}

// stopWords are words too common in questions to help rank passages.
var stopWords = func() map[string]bool {
	m := make(map[string]bool)
	for _, w := range strings.Fields(`a about after all also am an and any are as at be been before
		being both but by can could did do does doing don down during each few for from further
		had has have having he her here hers him his how i id if im in into is it its itself ive
		just ll me more most my myself no nor not now of off on once only or other our ours out
		over own please re s same she should so some such t than that thats the their theirs them
		then there these they this those through to too under until up us ve very was we were what
		whats when where wheres which while who whom why will with would you your youre yours
		hi hello hey okay ok um uh yeah`) {
		m[w] = true
	}
	// Fillers callers add around a question. Articles use them rarely
	// and at random, so BM25 would weigh them high.
	for _, w := range strings.Fields(`er erm hmm mm oh ah oops yep nope well actually really
		basically anyway like maybe thanks thank cheers wanna gonna gotta lemme gimme kinda`) {
		m[w] = true
	}
	return m
}()
