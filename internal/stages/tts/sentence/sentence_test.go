package sentence

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func texts(ss []Sentence) []string {
	out := []string{}
	for _, s := range ss {
		out = append(out, s.Text)
	}
	return out
}

func TestSplit(t *testing.T) {
	for _, tt := range []struct {
		name string
		in   string
		want []string
	}{
		{"two sentences", "Hello there. How are you?", []string{"Hello there.", "How are you?"}},
		{"exclamation and question", "Great! Really?! Yes.", []string{"Great!", "Really?!", "Yes."}},
		{"title", "Ask Dr. Lee about it. She knows.", []string{"Ask Dr. Lee about it.", "She knows."}},
		{"Mrs and St", "Mrs. Smith lives on Main St. near the park. Done.", []string{"Mrs. Smith lives on Main St. near the park.", "Done."}},
		{"decimal", "It costs 3.5 dollars. Cheap.", []string{"It costs 3.5 dollars.", "Cheap."}},
		{"e.g. and i.e.", "Use a card, e.g. Visa or i.e. credit. Then pay.", []string{"Use a card, e.g. Visa or i.e. credit.", "Then pay."}},
		{"domain name", "Visit example.com today. Thanks.", []string{"Visit example.com today.", "Thanks."}},
		{"initial", "J. R. Smith wrote it. Read it.", []string{"J. R. Smith wrote it.", "Read it."}},
		{"a.m. then capital", "We open at 9 a.m. The store closes at 8 p.m. on Sundays.", []string{"We open at 9 a.m.", "The store closes at 8 p.m. on Sundays."}},
		{"etc. then lowercase", "Bring pens, paper, etc. and a bag. Go.", []string{"Bring pens, paper, etc. and a bag.", "Go."}},
		{"ellipsis then lowercase", "Well... maybe not. Fine.", []string{"Well... maybe not.", "Fine."}},
		{"ellipsis then capital", "Well... Maybe not.", []string{"Well...", "Maybe not."}},
		{"unicode ellipsis", "Hmm… Let me check.", []string{"Hmm…", "Let me check."}},
		{"closing quote", `He said "stop." Then he left.`, []string{`He said "stop."`, "Then he left."}},
		{"closing bracket", "It works (mostly.) Try it.", []string{"It works (mostly.)", "Try it."}},
		{"newlines", "Steps:\n- open the app\n- tap Orders\n\nDone", []string{"Steps:", "- open the app", "- tap Orders", "Done"}},
		{"no end flushes", "no punctuation at all", []string{"no punctuation at all"}},
		{"trailing period flushes", "Just one.", []string{"Just one."}},
		{"empty", "", []string{}},
		{"whitespace", "  \n\n  ", []string{}},
		{"number at end", "You have 3. Then four.", []string{"You have 3.", "Then four."}},
		{"version inside", "Update to v2.1.3 now. Done.", []string{"Update to v2.1.3 now.", "Done."}},
		{"U.S. then capital", "Ships in the U.S. Orders abroad take longer.", []string{"Ships in the U.S.", "Orders abroad take longer."}},
		{"U.S. then lowercase", "The U.S. office is open.", []string{"The U.S. office is open."}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			// Whole, and fed one byte at a time: the same sentences.
			for _, pieces := range [][]string{{tt.in}, strings.Split(tt.in, ""), chunks(tt.in, 3)} {
				var s Splitter
				var got []Sentence
				for _, p := range pieces {
					got = append(got, s.Feed(p)...)
				}
				got = append(got, s.Flush()...)
				require.Equal(t, tt.want, texts(got))
				for _, g := range got {
					require.Equal(t, g.Text, tt.in[g.Offset:g.Offset+len(g.Text)], "offset of %q", g.Text)
				}
			}
		})
	}
}

func chunks(s string, n int) []string {
	var out []string
	for len(s) > n {
		out = append(out, s[:n])
		s = s[n:]
	}
	return append(out, s)
}

// A sentence is returned as soon as the character after its end arrives,
// not at the end of the stream.
func TestEarly(t *testing.T) {
	var s Splitter
	require.Empty(t, s.Feed("Hello there."))
	require.Equal(t, []string{"Hello there."}, texts(s.Feed(" How")))
	require.Empty(t, s.Feed(" are you"))
	require.Equal(t, []string{"How are you?"}, texts(s.Feed("?\n")))
	require.Empty(t, s.Feed("Dr."))
	require.Empty(t, s.Feed(" Lee"), "a title does not end a sentence")
	require.Empty(t, s.Feed(" came at 9 a.m."))
	require.Empty(t, s.Feed(" "), "after a.m. the next word decides")
	require.Equal(t, []string{"Dr. Lee came at 9 a.m."}, texts(s.Feed("Then")))
	require.Equal(t, []string{"Then"}, texts(s.Flush()))
	require.Empty(t, s.Flush(), "flush resets")
}

func TestOverlong(t *testing.T) {
	s := Splitter{MaxLen: 40}
	in := "this goes on and on without any end, because it is a list of things and more things"
	got := texts(s.Feed(in))
	require.Equal(t, []string{"this goes on and on without any end,", "because it is a list of things and"}, got)
	require.Equal(t, []string{"more"}, texts(s.Feed(strings.Repeat("y", 50))))
	require.Empty(t, s.Feed("zz"), "no space to cut at: wait")
	require.Equal(t, []string{"things" + strings.Repeat("y", 50) + "zz"}, texts(s.Flush()))
}

func TestFirstClause(t *testing.T) {
	for _, tt := range []struct {
		name string
		in   string
		want []string
	}{
		{"long first sentence", "To reset your password, open the sign-in page, then choose forgot password. Then wait, please.",
			[]string{"To reset your password,", "open the sign-in page, then choose forgot password.", "Then wait, please."}},
		{"short clause kept whole", "Sure, I can help with that. Fine.", []string{"Sure, I can help with that.", "Fine."}},
		{"sentence ends first", "Yes. Refunds go back to the card, within a week.", []string{"Yes.", "Refunds go back to the card, within a week."}},
		{"thousands are not clauses", "We have 1,000,000 items in stock today, all of them new.", []string{"We have 1,000,000 items in stock today,", "all of them new."}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for _, pieces := range [][]string{{tt.in}, strings.Split(tt.in, "")} {
				s := Splitter{FirstClause: true}
				var got []Sentence
				for _, p := range pieces {
					got = append(got, s.Feed(p)...)
				}
				got = append(got, s.Flush()...)
				require.Equal(t, tt.want, texts(got))
			}
		})
	}
	// After Flush, the next answer's first clause is cut again.
	s := Splitter{FirstClause: true}
	s.Feed("I can help you with that, of course.")
	s.Flush()
	require.Equal(t, []string{"I can help you with that,"}, texts(s.Feed("I can help you with that, of course.")))
}
