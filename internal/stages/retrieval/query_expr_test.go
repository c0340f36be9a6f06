package retrieval

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// The wider query is run when the first finds fewer than k passages: it
// must differ from the first, or Retrieve runs the same query twice (as
// it did for every query whose words are all rare and that has no
// question word, such as an off-topic "tell me a joke about penguins").
func TestQueryExprWiderOnlyWhenWider(t *testing.T) {
	common := map[string]bool{"order": true}
	tests := []struct {
		query        string
		match, wider string
	}{
		// No common word, no question word: nothing to widen.
		{"tell me a joke about penguins", `"tell" OR "joke" OR "penguins"`, ``},
		// Too few rare words: the common ones are searched already.
		{"cancel my order", `"cancel" OR "order"`, ``},
		// One word: the question words are searched for too, at once.
		{"where is my order", `"order" OR questions : ("where")`, ``},
		// Common words left out of the first query.
		{"cancel the lamp order", `"cancel" OR "lamp"`, `"cancel" OR "lamp" OR "order"`},
		// Question words searched for only by the wider query.
		{"when do gift cards expire", `"gift" OR "cards" OR "expire"`, `"gift" OR "cards" OR "expire" OR questions : ("when")`},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			match, wider := queryExpr(words(tt.query), DefaultMaxTerms, DefaultMinTerms, common)
			require.Equal(t, tt.match, match)
			require.Equal(t, tt.wider, wider)
		})
	}
}
