package retrieval

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// hugeIndex returns an index with n generated passages that all contain the
// words alpha, beta, gamma and delta, so a query for them ranks every row:
// a query slow enough to be interrupted. The rows are generated inside
// SQLite, which is much faster than inserting them one by one.
func hugeIndex(t testing.TB, n int) *Index {
	t.Helper()
	ctx := testContext(t)
	ix, err := Open(ctx, Config{}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { ix.Close() })
	_, err = ix.db.ExecContext(ctx, fmt.Sprintf(`INSERT INTO passage (title, heading, body, article_id, seq)
		WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x < %d)
		SELECT 'generated ' || x, 'section ' || (x %% 97),
			'alpha beta gamma delta word' || (x %% 1013) || ' other' || (x %% 331) || ' alpha', 'gen' || x, 1
		FROM c`, n))
	require.NoError(t, err)
	return ix
}

// hugeRows sizes hugeIndex so its slow query takes some 100 ms (some
// 500 ms under the race detector) on the 2-core reference machine.
func hugeRows() int {
	if raceEnabled {
		return 5_000
	}
	return 100_000
}

// A huge transcript's words stop being cut soon after the context ends:
// they were cut, all 800,000 of them, before the first look at it, which
// kept a CPU busy some 0.5 s after the stage had been given up.
func TestRetrieveHugeQueryStopsAtDeadline(t *testing.T) {
	ix, _ := helpdeskIndex(t)
	text := strings.Repeat("i ordered a lamp last week and it's still not here wheres my refund ", 4<<20/68)
	bound := 150 * time.Millisecond
	if raceEnabled {
		bound = time.Second // cutting the words takes some 3 s
	}
	ctx, cancel := context.WithTimeout(testContext(t), 10*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := ix.Retrieve(ctx, text, 3)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Less(t, time.Since(start), bound)
}
