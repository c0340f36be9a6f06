package domain

import (
	"os"
	"regexp"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"
)

// The examples of docs/domain.md make a domain that loads, with the
// evaluation files read as the evaluation commands read them. The
// articles the examples link but do not show are given a line of text,
// and the partial front-matter examples a body.
func TestDocExamplesLoad(t *testing.T) {
	doc, err := os.ReadFile("../../docs/domain.md")
	require.NoError(t, err)
	var yamls, mds []string
	for _, b := range regexp.MustCompile("(?s)```(\\w*)\n(.*?)```").FindAllStringSubmatch(string(doc), -1) {
		switch b[1] {
		case "yaml":
			yamls = append(yamls, b[2])
		case "markdown":
			mds = append(mds, b[2])
		}
	}
	require.Len(t, yamls, 4, "intents, split, caller questions, retrieval")
	require.Len(t, mds, 3, "gift cards, exchanges, international shipping")
	require.True(t, strings.HasPrefix(mds[0], "# Gift cards"))
	art := func(text string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(text)} }
	stub := func(title string) *fstest.MapFile { return art("# " + title + "\n\nText about it.\n") }
	fsys := fstest.MapFS{
		IntentsFile:                          art(yamls[0]),
		"articles/gift-cards.md":             art(mds[0]),
		"articles/exchanges.md":              art(mds[1] + "\nYou can swap an item.\n"),
		"articles/international-shipping.md": art(mds[2] + "\nWe ship abroad.\n"),
		"classes/abroad.txt":                 art("montreal\nparis\n"),
		"articles/tracking-your-order.md":    stub("Tracking your order"),
		"articles/delayed-deliveries.md":     stub("Delayed deliveries"),
		"articles/shipping-costs.md":         stub("Shipping costs"),
		"articles/changing-an-order.md":      stub("Changing an order"),
		SplitFile:                            art(yamls[1]),
		HeldOutFile:                          art(yamls[2]),
		RetrievalEvalFile:                    art(yamls[3]),
	}
	d, err := LoadFS(fsys, "doc")
	require.NoError(t, err)
	require.Len(t, d.Intents, 3)
	_, err = d.Splits()
	require.NoError(t, err)
	_, err = d.RetrievalEvalFile(HeldOutFile)
	require.NoError(t, err)
	_, err = d.RetrievalEval()
	require.NoError(t, err)
}
