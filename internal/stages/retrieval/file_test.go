package retrieval

import (
	"database/sql"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/domain"
)

var (
	apples  = []domain.Article{{ID: "a", Title: "Apples", Body: "Apples are red."}}
	bananas = []domain.Article{{ID: "b", Title: "Bananas", Body: "Bananas are yellow."}}
)

// busyConn takes one of ix's connections until the test ends, so the
// next query runs on another one.
func busyConn(t *testing.T, ix *Index) {
	t.Helper()
	c, err := ix.db.Conn(testContext(t))
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
}

// Two servers given one -retrieval.index each keep their own index: the
// second one's build does not replace the tables the first one reads. It
// did: Open dropped and rebuilt them in place, so the first server
// answered from the second's articles.
func TestOpenSharedFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "index.db")
	first, err := Open(testContext(t), Config{Path: path, MaxConns: 2}, apples)
	require.NoError(t, err)
	defer first.Close()
	second, err := Open(testContext(t), Config{Path: path, MaxConns: 2}, bananas)
	require.NoError(t, err)
	defer second.Close()
	// On a connection opened after the second build as well.
	busyConn(t, first)
	for _, tt := range []struct {
		ix    *Index
		query string
		want  []string
	}{
		{first, "apples", []string{"a#1"}},
		{first, "bananas", nil},
		{second, "bananas", []string{"b#1"}},
		{second, "apples", nil},
	} {
		ps, err := tt.ix.Retrieve(testContext(t), tt.query, 3)
		require.NoError(t, err, tt.query)
		require.Equal(t, tt.want, ids(ps), tt.query)
	}
	// No build file is left beside the index.
	entries, err := os.ReadDir(filepath.Dir(path))
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	require.Equal(t, []string{"index.db"}, names)
}

// An index file deleted while voiced runs leaves the index working, and
// is not created again, empty: a connection the pool opened afterwards
// made a new, empty database there, and its queries failed ("no such
// table: passage").
func TestOpenFileDeleted(t *testing.T) {
	path := filepath.Join(t.TempDir(), "index.db")
	ix, err := Open(testContext(t), Config{Path: path, MaxConns: 2}, apples)
	require.NoError(t, err)
	defer ix.Close()
	require.NoError(t, os.Remove(path))
	busyConn(t, ix)
	ps, err := ix.Retrieve(testContext(t), "apples", 3)
	require.NoError(t, err)
	require.Equal(t, []string{"a#1"}, ids(ps))
	require.NoFileExists(t, path)

	// A connection opened now finds no file, and says so.
	db, err := sql.Open("sqlite", readDSN(path))
	require.NoError(t, err)
	defer db.Close()
	require.ErrorContains(t, db.PingContext(testContext(t)), "unable to open database file")
	require.NoFileExists(t, path)
}

// A build file that a server killed while building left beside the index
// is removed at the next Open once it is older than staleBuild; one
// younger (another server's build, still running) and other files are
// left. They stayed forever, each the size of an index.
func TestOpenRemovesStaleBuilds(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "index.db")
	old := time.Now().Add(-2 * staleBuild)
	for _, f := range []struct {
		name string
		old  bool
	}{
		{".index.db.111.tmp", true},
		{".index.db.111.tmp-journal", true},
		{".index.db.222.tmp", false},
		{".other.db.333.tmp", true},
		{"notes.tmp", true},
	} {
		p := filepath.Join(dir, f.name)
		require.NoError(t, os.WriteFile(p, []byte("x"), 0o644))
		if f.old {
			require.NoError(t, os.Chtimes(p, old, old))
		}
	}
	ix, err := Open(testContext(t), Config{Path: path, MaxConns: 1}, apples)
	require.NoError(t, err)
	defer ix.Close()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	require.ElementsMatch(t, []string{".index.db.222.tmp", ".other.db.333.tmp", "index.db", "notes.tmp"}, names)
}

// A -retrieval.index that is a symbolic link to a file not built yet
// keeps being one: the build writes the file it names, relative to the
// link's directory. It replaced the link with a file.
func TestOpenDanglingSymlink(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(dir, "links"), 0o755))
	require.NoError(t, os.Mkdir(filepath.Join(dir, "data"), 0o755))
	target, link := filepath.Join(dir, "data", "real.db"), filepath.Join(dir, "links", "index.db")
	require.NoError(t, os.Symlink(filepath.Join("..", "data", "real.db"), link))

	ix, err := Open(testContext(t), Config{Path: link, MaxConns: 1}, apples)
	require.NoError(t, err)
	defer ix.Close()
	fi, err := os.Lstat(link)
	require.NoError(t, err)
	require.Equal(t, os.ModeSymlink, fi.Mode().Type(), "the link was replaced")
	fi, err = os.Stat(target)
	require.NoError(t, err, "the link's target was not written")
	require.True(t, fi.Mode().IsRegular())
	ps, err := ix.Retrieve(testContext(t), "apples", 3)
	require.NoError(t, err)
	require.NotEmpty(t, ps)
}

// Links that never end in a file are an error, not a file written over
// one of them.
func TestOpenSymlinkLoop(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.db"), filepath.Join(dir, "b.db")
	require.NoError(t, os.Symlink("b.db", a))
	require.NoError(t, os.Symlink("a.db", b))
	_, err := Open(testContext(t), Config{Path: a, MaxConns: 1}, apples)
	require.ErrorContains(t, err, "symbolic links")
	for _, p := range []string{a, b} {
		fi, err := os.Lstat(p)
		require.NoError(t, err)
		require.Equal(t, os.ModeSymlink, fi.Mode().Type(), p)
	}
}

// A -retrieval.index that is a symbolic link keeps being one: the build
// replaces its target. It replaced the link with the new file, leaving
// the target the link named stale.
func TestOpenSymlinkedFile(t *testing.T) {
	dir := t.TempDir()
	target, link := filepath.Join(dir, "real.db"), filepath.Join(dir, "index.db")
	first, err := Open(testContext(t), Config{Path: target, MaxConns: 1}, apples)
	require.NoError(t, err)
	require.NoError(t, first.Close())
	require.NoError(t, os.Symlink("real.db", link))

	ix, err := Open(testContext(t), Config{Path: link, MaxConns: 1}, bananas)
	require.NoError(t, err)
	defer ix.Close()
	fi, err := os.Lstat(link)
	require.NoError(t, err)
	require.Equal(t, os.ModeSymlink, fi.Mode().Type(), "the link was replaced")
	// The target holds the new index.
	db, err := sql.Open("sqlite", readDSN(target))
	require.NoError(t, err)
	defer db.Close()
	var n int
	require.NoError(t, db.QueryRowContext(testContext(t), "SELECT count(*) FROM passage WHERE article_id = 'b'").Scan(&n))
	require.Positive(t, n)
	ps, err := ix.Retrieve(testContext(t), "bananas", 3)
	require.NoError(t, err)
	require.Equal(t, []string{"b#1"}, ids(ps))
}
