package retrieval

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/domain"
)

// commonArticles are four passages: "store" (with "stores") is in all
// four, "the", "at" and "hours" in two, every other word in one.
var commonArticles = []domain.Article{
	{ID: "hours", Title: "Store hours", Body: "The store opens at nine.\n\nThe stores close at eight."},
	{ID: "parking", Title: "Store parking", Body: "Every store has parking."},
	{ID: "returns", Title: "Returns", Body: "Bring items back to a store."},
}

// manyWords is commonArticles and an article of a thousand distinct words.
var manyWords = append(slices.Clone(commonArticles), domain.Article{ID: "words", Title: "Words", Body: func() string {
	var b strings.Builder
	for i := range 1000 {
		fmt.Fprintf(&b, "word%d ", i)
	}
	return b.String()
}()})

// A word is common when its stem is in more than CommonFraction of the
// passages; a fraction outside (0, 1] is the default.
func TestCommonFraction(t *testing.T) {
	store := []string{"store", "stores"}
	inTwo := []string{"at", "hours", "store", "stores", "the"}
	tests := []struct {
		fraction float64
		want     []string
	}{
		{0, inTwo}, // the default, a third: in 2 of 4
		{-1, inTwo},
		{2, inTwo},
		{0.25, inTwo}, // more than 1 passage
		{0.5, store},  // more than 2
		{0.75, store}, // more than 3
		{1, nil},      // more than all 4: none
	}
	for _, tt := range tests {
		ix, err := Open(testContext(t), Config{CommonFraction: tt.fraction}, commonArticles)
		require.NoError(t, err)
		require.NoError(t, ix.Close())
		var got []string
		for w := range ix.common {
			got = append(got, w)
		}
		require.ElementsMatch(t, tt.want, got, "fraction %v", tt.fraction)
	}
}

// findCommon's statements fail with the documented error, and the scratch
// tables it made are dropped.
func TestFindCommonErrors(t *testing.T) {
	tests := []struct {
		name string
		// setUp breaks c (or ctx) before findCommon runs.
		setUp func(t *testing.T, c *sql.Conn) context.Context
		is    error  // the error wrapped, if any
		says  string // what SQLite says, if no error is wrapped
	}{
		{"closed connection", func(t *testing.T, c *sql.Conn) context.Context {
			require.NoError(t, c.Close())
			return testContext(t)
		}, sql.ErrConnDone, ""},
		{"context ended", func(t *testing.T, c *sql.Conn) context.Context {
			ctx, cancel := context.WithCancel(testContext(t))
			cancel()
			return ctx
		}, context.Canceled, ""},
		{"a scratch table exists", func(t *testing.T, c *sql.Conn) context.Context {
			exec(t, c, `CREATE VIRTUAL TABLE temp.stems USING fts5(w)`)
			return testContext(t)
		}, nil, "already exists"},
		{"inside a transaction", func(t *testing.T, c *sql.Conn) context.Context {
			exec(t, c, `BEGIN`) // the words' own transaction cannot begin
			return testContext(t)
		}, nil, "cannot start a transaction within a transaction"},
		{"scratch space full", func(t *testing.T, c *sql.Conn) context.Context {
			// Room for the tables, not for the words.
			exec(t, c, `PRAGMA temp.max_page_count = 8`)
			return testContext(t)
		}, nil, "database or disk is full"},
		{"no passage table", func(t *testing.T, c *sql.Conn) context.Context {
			return testContext(t)
		}, nil, "no such fts5 table: main.passage"},
		{"passage is no FTS5 table", func(t *testing.T, c *sql.Conn) context.Context {
			exec(t, c, `CREATE TABLE passage (body TEXT)`)
			return testContext(t)
		}, nil, "no such fts5 table: main.passage"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db, err := sql.Open("sqlite", "file:/voiced-retrieval-test-"+uuid.NewString()+"?vfs=memdb")
			require.NoError(t, err)
			defer db.Close()
			c, err := db.Conn(testContext(t))
			require.NoError(t, err)
			defer c.Close()
			ctx := tt.setUp(t, c)

			ix := &Index{cfg: Config{}.withDefaults(), passages: 4}
			err = ix.findCommon(ctx, c, manyWords)
			require.ErrorContains(t, err, "retrieval: term statistics: ")
			if tt.is != nil {
				require.ErrorIs(t, err, tt.is)
			} else {
				require.ErrorContains(t, err, tt.says)
			}
			require.Empty(t, ix.common)
			require.True(t, ix.vocab["parking"], "the words are known before the statistics fail")
			if !errors.Is(err, sql.ErrConnDone) && !strings.Contains(tt.name, "exists") {
				require.Zero(t, scratchTables(t, c), "scratch tables left")
			}
		})
	}
}

// Too few passages for a word to be common: findCommon asks SQLite
// nothing (here, of a closed connection) and knows the words.
func TestFindCommonFewPassages(t *testing.T) {
	db, err := sql.Open("sqlite", "file:/voiced-retrieval-test-"+uuid.NewString()+"?vfs=memdb")
	require.NoError(t, err)
	defer db.Close()
	c, err := db.Conn(testContext(t))
	require.NoError(t, err)
	require.NoError(t, c.Close())
	ix := &Index{cfg: Config{}.withDefaults(), passages: 1}
	require.NoError(t, ix.findCommon(testContext(t), c, commonArticles[1:2]))
	require.Empty(t, ix.common)
	require.Equal(t, map[string]bool{"store": true, "parking": true, "every": true, "has": true}, ix.vocab)
}

func exec(t *testing.T, c *sql.Conn, q string) {
	t.Helper()
	_, err := c.ExecContext(testContext(t), q)
	require.NoError(t, err)
}

// scratchTables counts the temporary tables findCommon makes that exist.
func scratchTables(t *testing.T, c *sql.Conn) int {
	t.Helper()
	var n int
	require.NoError(t, c.QueryRowContext(testContext(t),
		`SELECT count(*) FROM sqlite_temp_master WHERE name IN ('stems', 'stems_vocab', 'passage_vocab')`).Scan(&n))
	return n
}
