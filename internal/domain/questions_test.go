package domain

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// An intent's example goes with its first article, unless it says a later
// article's title or keyword, word for word, more than the first's: then
// it asks one of the intent's rarer questions and goes with that article.
func TestQuestionsGoToTheArticleTheyName(t *testing.T) {
	d, err := LoadFS(mapFS(map[string]string{
		IntentsFile: "intents:\n  - name: pay\n    articles: [methods, declined, credit]\n    examples:\n" +
			"      - what cards do you take\n" + // no article's phrase: the first
			"      - my card got declined\n" + // "decline", a later article's keyword
			"      - my visa was rejected\n" + // "visa" (methods) against "rejected" (declined), as rare: a tie, the first
			"      - can i pay with my debit card\n" + // "debit card" (methods) only
			"      - is this card declined or just a debit card\n" + // "declined" against "debit card": more words weigh more
			"      - can i have credit on the store\n" + // "store credit" not in a row: the first
			"      - can i have store credit\n" + // "store credit" in a row
			"      - where is my refund\n" + // "refund to" needs its "to": the first
			"  - name: hours\n    articles: [hours]\n    examples: [when do you open, is it declined]\n" +
			"  - name: greeting\n    examples: [hi]\n",
		"articles/methods.md":  "---\nkeywords: [visa, debit card]\n---\n# Payment methods\n\nWe take cards.\n",
		"articles/declined.md": "---\nkeywords: [declined, rejected]\n---\n# Declined payments\n\nCall your bank.\n",
		"articles/credit.md":   "---\nkeywords: [store credit, refund to]\n---\n# Refund methods\n\nStore credit never expires.\n",
		"articles/hours.md":    "# Hours\n\nNine to five.\n",
	}), "dom")
	require.NoError(t, err)
	questions := map[string][]string{}
	for _, a := range d.Articles {
		questions[a.ID] = a.Questions
	}
	require.Equal(t, map[string][]string{
		"methods":  {"what cards do you take", "my visa was rejected", "can i pay with my debit card", "is this card declined or just a debit card", "can i have credit on the store", "where is my refund"},
		"declined": {"my card got declined"},
		"credit":   {"can i have store credit"},
		// An intent with one article: every example, whatever it says.
		"hours": {"when do you open", "is it declined"},
	}, questions)
}
