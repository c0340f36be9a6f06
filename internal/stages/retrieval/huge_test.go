package retrieval

import (
	"fmt"
	"testing"

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
