package lm

import (
	"bytes"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSentences(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string // sentences separated by " | "
	}{
		{"plain", "Where is my order?", "where is my order"},
		{"split", "Hi there. Where's my parcel!", "hi there | where's my parcel"},
		{"markdown", "# Returns\n\nYou can return **most** items.\n- Print the label", "returns | you can return most items | print the label"},
		{"money", "Shipping costs $4.99 or $10.", "shipping costs four dollars ninety nine cents or ten dollars"},
		{"one dollar", "It is $1.", "it is one dollar"},
		{"pounds", "£25 gift card", "twenty five pounds gift card"},
		{"percent", "Save 15% today", "save fifteen percent today"},
		{"time", "Open 9:30 am to 5 PM", "open nine thirty a m to five p m"},
		{"clock", "from 10:00 until 18:05", "from ten o'clock until eighteen oh five"},
		{"ordinal", "the 1st, 2nd, 3rd and 21st", "the first second third and twenty first"},
		{"range", "3-5 business days", "three to five business days"},
		{"decimal", "version 2.5", "version two point five"},
		{"thousands", "over 1,250 stores", "over one thousand two hundred fifty stores"},
		{"year", "since 1998 and 2024 and 2005", "since nineteen ninety eight and twenty twenty four and two thousand five"},
		{"order number", "order 40213987", "order four zero two one three nine eight seven"},
		{"hash", "order #12", "order number twelve"},
		{"slash", "support 24/7", "support twenty four seven"},
		{"email", "Write to help@maple-street.com today", "write to help at maple dash street dot com today"},
		{"url", "visit www.maplestreet.com", "visit w w w dot maplestreet dot com"},
		{"symbols", "Rock & roll + more", "rock and roll plus more"},
		{"apostrophes", "'Don’t' do it", "don't do it"},
		{"empty", " ... !!", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var parts []string
			for _, s := range Sentences(tt.in) {
				parts = append(parts, strings.Join(s, " "))
			}
			require.Equal(t, tt.want, strings.Join(parts, " | "))
		})
	}
}

func TestCardinalOrdinal(t *testing.T) {
	tests := []struct {
		n        int
		card, or string
	}{
		{0, "zero", "zeroth"},
		{7, "seven", "seventh"},
		{12, "twelve", "twelfth"},
		{20, "twenty", "twentieth"},
		{42, "forty two", "forty second"},
		{100, "one hundred", "one hundredth"},
		{115, "one hundred fifteen", "one hundred fifteenth"},
		{3005, "three thousand five", "three thousand fifth"},
		{1_000_001, "one million one", "one million first"},
	}
	for _, tt := range tests {
		require.Equal(t, tt.card, Cardinal(tt.n), tt.n)
		require.Equal(t, tt.or, Ordinal(tt.n), tt.n)
	}
}

var corpus = [][]string{
	strings.Fields("where is my order"),
	strings.Fields("where is my parcel"),
	strings.Fields("cancel my order please"),
	strings.Fields("i want to cancel my order"),
	strings.Fields("i want to return my order"),
	strings.Fields("what are your opening hours"),
}

// classCorpus mentions some members of its classes; classes has members it
// never says (lamp, sofa, tuesday).
var (
	classCorpus = append(slices.Clone(corpus),
		strings.Fields("i want to return a jacket"),
		strings.Fields("i want to return a jacket on monday"),
		strings.Fields("my jacket came on friday"),
	)
	classes = Classes{"product": {"jacket", "lamp", "sofa"}, "day": {"monday", "tuesday", "friday"}}
)

// models are the models every model test runs on: plain, and class-based.
func models(t *testing.T, order int) map[string]*Model {
	t.Helper()
	plain, err := Build(corpus, order)
	require.NoError(t, err)
	cls, err := BuildClasses(classCorpus, order, classes)
	require.NoError(t, err)
	return map[string]*Model{"plain": plain, "classes": cls}
}

func TestBuildErrors(t *testing.T) {
	_, err := Build(nil, 3)
	require.ErrorIs(t, err, ErrEmptyCorpus)
	_, err = Build([][]string{{}}, 3)
	require.ErrorIs(t, err, ErrEmptyCorpus)
	_, err = Build(corpus, 9)
	require.Error(t, err)
	_, err = Build([][]string{{"a b"}}, 3)
	require.Error(t, err)
	_, err = Build([][]string{{"<s>"}}, 3)
	require.Error(t, err)
}

// Every conditional distribution must sum to one over the vocabulary, for
// seen, partly seen and unseen histories alike.
func TestDistributionsSumToOne(t *testing.T) {
	for _, order := range []int{1, 2, 3, 4} {
		for name, m := range models(t, order) {
			for _, h := range [][]string{nil, {"<s>"}, {"my"}, {"is", "my"}, {"<s>", "where"}, {"want", "to"}, {"unseen", "words"}, {"my", "unseen"}, {"to", "cancel", "my"}, {"a", "lamp"}, {"return", "a"}, {"jacket", "on"}} {
				sum := 0.0
				for _, w := range append(m.Vocabulary(), EOS) {
					p := m.Prob(h, w)
					require.Greater(t, p, 0.0)
					sum += p
				}
				require.InDelta(t, 1.0, sum, 1e-9, "%s order %d history %v", name, order, h)
			}
		}
	}
}

func TestProbabilitiesFavourSeen(t *testing.T) {
	m, err := Build(corpus, 3)
	require.NoError(t, err)
	require.Greater(t, m.Prob([]string{"is", "my"}, "order"), m.Prob([]string{"is", "my"}, "hours"))
	require.Greater(t, m.Prob([]string{"cancel", "my"}, "order"), m.Prob([]string{"cancel", "my"}, "parcel"))
	// Seen twice out of two: "where is" -> "my" always.
	require.Greater(t, m.Prob([]string{"where", "is"}, "my"), 0.6)
}

// The ARPA file, evaluated with the standard backoff rule, must give the same
// probabilities as the interpolated model.
func TestARPAMatchesModel(t *testing.T) {
	for name, m := range models(t, 3) {
		var buf bytes.Buffer
		require.NoError(t, m.WriteARPA(&buf))
		a, err := readARPA(buf.String(), 3)
		require.NoError(t, err, name)
		require.Equal(t, -99.0, a.prob[0]["<s>"])
		vocab := append(m.Vocabulary(), EOS)
		for _, h := range [][]string{{"<s>", "where"}, {"is", "my"}, {"my", "order"}, {"want", "to"}, {"hours", "what"}, {"unseen", "x"}, {"return", "a"}, {"a", "sofa"}, {"sofa", "on"}, {"on", "tuesday"}} {
			for _, w := range vocab {
				want := math.Log10(m.Prob(h, w))
				require.InDelta(t, want, a.score(h, w), 1e-5, "%s: %v %s", name, h, w)
			}
		}
		// Header counts match the sections.
		require.Contains(t, buf.String(), "ngram 1="+strconv.Itoa(len(vocab)+1), name)
		require.True(t, strings.HasSuffix(buf.String(), "\\end\\\n"))
	}
}

// What the corpus says about one member it says about all: a product it
// never mentions is likely where it mentions another.
func TestClassesGeneralise(t *testing.T) {
	m := models(t, 3)["classes"]
	require.Contains(t, m.Vocabulary(), "sofa")
	require.Contains(t, m.Vocabulary(), "tuesday")
	h := []string{"return", "a"}
	require.Greater(t, m.Prob(h, "sofa"), 0.1)
	require.Greater(t, m.Prob(h, "jacket"), m.Prob(h, "sofa"), "a member the corpus says keeps more of its class")
	require.Greater(t, m.Prob([]string{"jacket", "on"}, "tuesday"), 0.1)
	require.Less(t, m.Prob([]string{"on"}, "sofa"), 0.01)

	_, err := BuildClasses(classCorpus, 3, Classes{"a": {"jacket"}, "b": {"jacket"}})
	require.ErrorContains(t, err, `"jacket" is in classes`)
	_, err = BuildClasses(classCorpus, 3, Classes{"a": {"two words"}})
	require.Error(t, err)
}

func TestParseCorpus(t *testing.T) {
	sents, cls, err := ParseCorpus([]string{"Where's my lamp?", ClassLine("product", []string{"lamp", "sofa"}), "It's 9 now. Okay."})
	require.NoError(t, err)
	require.Equal(t, [][]string{{"where's", "my", "lamp"}, {"it's", "nine", "now"}, {"okay"}}, sents)
	require.Equal(t, Classes{"product": {"lamp", "sofa"}}, cls)
	for _, bad := range []string{"@class product", "@class product Lamp", "@class product big-lamp"} {
		_, _, err := ParseCorpus([]string{bad})
		require.Error(t, err, bad)
	}
}

func TestHashStable(t *testing.T) {
	require.Equal(t, Hash(corpus, 3, nil), Hash(corpus, 3, nil))
	require.NotEqual(t, Hash(corpus, 3, nil), Hash(corpus, 2, nil))
	require.NotEqual(t, Hash(corpus, 3, nil), Hash(corpus[1:], 3, nil))
	require.NotEqual(t, Hash(corpus, 3, nil), Hash(corpus, 3, classes))
}
