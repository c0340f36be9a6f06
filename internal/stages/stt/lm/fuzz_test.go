package lm

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// FuzzARPA builds a model from fuzzed domain text, as the recogniser's
// domain model is built, and checks the ARPA file it writes: it parses as
// ARPA, its counts match its sections, its probabilities and backoff
// weights are valid, every n-gram's history and suffix are listed, and it
// gives the model's probabilities, which sum to one after every history.
func FuzzARPA(f *testing.F) {
	f.Fuzz(func(t *testing.T, text string, order uint8) {
		o := int(order % 7) // 0 is the default, 6 is out of range
		sents := Sentences(text)
		for _, s := range sents {
			require.NotEmpty(t, s)
			for _, w := range s {
				require.NotEmpty(t, w)
				require.Equal(t, strings.ToLower(w), w)
				require.Len(t, strings.Fields(w), 1, "word %q", w)
			}
		}
		m, err := Build(sents, o)
		switch {
		case o == 6:
			require.Error(t, err)
			return
		case len(sents) == 0:
			require.ErrorIs(t, err, ErrEmptyCorpus)
			return
		}
		require.NoError(t, err)
		if o == 0 {
			o = 3
		}
		var buf bytes.Buffer
		require.NoError(t, m.WriteARPA(&buf))
		a, err := readARPA(buf.String(), o)
		require.NoError(t, err, "%s", buf.String())

		var again bytes.Buffer
		require.NoError(t, m.WriteARPA(&again))
		require.Equal(t, buf.String(), again.String(), "WriteARPA is not deterministic")
		require.Equal(t, Hash(sents, o, nil), Hash(sents, o, nil))

		vocab := append(m.Vocabulary(), EOS)
		var unigrams []string
		for g := range a.prob[0] {
			if g != BOS {
				unigrams = append(unigrams, g)
			}
		}
		require.ElementsMatch(t, vocab, unigrams)
		for _, s := range sents {
			for _, w := range s {
				require.Contains(t, a.prob[0], w)
			}
		}

		// The empty history and some listed ones, spread over the sorted list
		// (all would make an execution slow): probabilities from the file
		// match the model's and sum to one.
		var listed []string
		for n := 1; n < o; n++ {
			for g := range a.bo[n-1] {
				listed = append(listed, g)
			}
		}
		slices.Sort(listed)
		hists := [][]string{nil}
		for i := 0; i < len(listed); i += max(1, len(listed)/8) {
			hists = append(hists, strings.Split(listed[i], " "))
		}
		for _, h := range hists {
			sum := 0.0
			for _, w := range vocab {
				lp := a.score(h, w)
				require.InDelta(t, math.Log10(m.Prob(h, w)), lp, 1e-5, "P(%s | %v)", w, h)
				sum += math.Pow(10, lp)
			}
			require.InDelta(t, 1, sum, 1e-4, "after %v", h)
		}
	})
}

// arpaFile is a parsed ARPA file: for each order n, the log10
// probabilities and the backoff weights of the (n+1)-grams.
type arpaFile struct {
	prob, bo []map[string]float64
}

// readARPA parses an ARPA file of the given order strictly, checking what
// a recogniser's loader relies on.
func readARPA(s string, order int) (arpaFile, error) {
	a := arpaFile{prob: make([]map[string]float64, order), bo: make([]map[string]float64, order)}
	for i := range a.prob {
		a.prob[i], a.bo[i] = map[string]float64{}, map[string]float64{}
	}
	sc := bufio.NewScanner(strings.NewReader(s))
	sc.Buffer(nil, 1<<20)
	next := func() (string, bool) {
		if !sc.Scan() {
			return "", false
		}
		return sc.Text(), true
	}
	expect := func(want string) error {
		if l, ok := next(); !ok || l != want {
			return fmt.Errorf("got %q, want %q", l, want)
		}
		return nil
	}
	if err := expect(`\data\`); err != nil {
		return a, err
	}
	counts := make([]int, order)
	for n := 1; n <= order; n++ {
		l, _ := next()
		if _, err := fmt.Sscanf(l, "ngram %d=%d", new(int), &counts[n-1]); err != nil || l != fmt.Sprintf("ngram %d=%d", n, counts[n-1]) {
			return a, fmt.Errorf("count line %q for order %d", l, n)
		}
	}
	for n := 1; n <= order; n++ {
		if err := expect(""); err != nil {
			return a, err
		}
		if err := expect(fmt.Sprintf(`\%d-grams:`, n)); err != nil {
			return a, err
		}
		for range counts[n-1] {
			l, _ := next()
			if err := a.entry(l, n, order); err != nil {
				return a, err
			}
		}
	}
	for _, want := range []string{"", `\end\`} {
		if err := expect(want); err != nil {
			return a, err
		}
	}
	if l, ok := next(); ok {
		return a, fmt.Errorf("%q after the end", l)
	}
	return a, nil
}

// entry parses one n-gram line and checks it against the lines before it.
func (a arpaFile) entry(l string, n, order int) error {
	f := strings.Split(l, " ")
	if len(f) != 1+n && !(len(f) == 2+n && n < order) {
		return fmt.Errorf("%d-gram line %q has %d fields", n, l, len(f))
	}
	p, err := strconv.ParseFloat(f[0], 64)
	words := f[1 : 1+n]
	g := strings.Join(words, " ")
	switch {
	case err != nil || math.IsNaN(p) || p > 0:
		return fmt.Errorf("%q: bad log probability", l)
	case g == BOS && p != -99:
		return fmt.Errorf("%q: <s> must have -99", l)
	case g != BOS && math.IsInf(p, 0):
		return fmt.Errorf("%q: infinite log probability", l)
	case slices.Contains(words, "") || len(strings.Fields(g)) != n:
		return fmt.Errorf("%q: bad words", l)
	case slices.Contains(words[1:], BOS) || slices.Contains(words[:n-1], EOS):
		return fmt.Errorf("%q: <s> or </s> inside an n-gram", l)
	}
	if _, dup := a.prob[n-1][g]; dup {
		return fmt.Errorf("%q: listed twice", l)
	}
	if n > 1 {
		hist, suffix := strings.Join(words[:n-1], " "), strings.Join(words[1:], " ")
		if _, ok := a.bo[n-2][hist]; !ok {
			return fmt.Errorf("%q: history %q not listed with a backoff weight", l, hist)
		}
		if _, ok := a.prob[n-2][suffix]; !ok {
			return fmt.Errorf("%q: suffix %q not listed", l, suffix)
		}
	}
	a.prob[n-1][g] = p
	if len(f) == 2+n {
		b, err := strconv.ParseFloat(f[1+n], 64)
		if err != nil || math.IsNaN(b) || math.IsInf(b, 0) || b > 0 {
			return fmt.Errorf("%q: bad backoff weight", l)
		}
		a.bo[n-1][g] = b
	}
	return nil
}

// score is the log10 probability of w after h by the ARPA backoff rule.
func (a arpaFile) score(h []string, w string) float64 {
	if len(h) >= len(a.prob) {
		h = h[len(h)-len(a.prob)+1:]
	}
	g := strings.Join(append(slices.Clone(h), w), " ")
	if p, ok := a.prob[len(h)][g]; ok {
		return p
	}
	if len(h) == 0 {
		return math.Inf(-1)
	}
	return a.bo[len(h)-1][strings.Join(h, " ")] + a.score(h[1:], w)
}

// FuzzLexicon reads a fuzzed dictionary and domain pronunciations file
// (as ReadLexicon once it has read the dictionary's file): the domain's
// entries, when they parse, are lower-case words with upper-case phones
// sorted by word; every word either file lists is found, the domain's with
// its first phones; phones come back separated by single spaces.
func FuzzLexicon(f *testing.F) {
	f.Add("parcel\tP AA R  S AH L\r\nread(2) R EH D\nread R IY D\nwhere's W EH R Z\nlonely\n  about AH B AW T\n", "hiya HH AY Y AH\n;;; c\nQR K Y UW\n")
	f.Add("\ufeffb B\na A\n\vc C\n", "# x\n  a  X\nA Y\n")
	f.Fuzz(func(t *testing.T, dict, domain string) {
		prons, err := ParsePronunciations(strings.NewReader(domain), "domain")
		if err != nil {
			prons = nil
		}
		domainPhones := map[string]string{}
		for i, p := range prons {
			require.Equal(t, strings.ToLower(p.Word), p.Word)
			require.Len(t, strings.Fields(p.Word), 1, "word %q", p.Word)
			require.Equal(t, strings.Join(strings.Fields(p.Phones), " "), p.Phones)
			require.Equal(t, strings.ToUpper(p.Phones), p.Phones)
			if i > 0 {
				require.LessOrEqual(t, prons[i-1].Word, p.Word)
			}
			if _, dup := domainPhones[p.Word]; !dup && !strings.ContainsRune(p.Word, '(') {
				domainPhones[p.Word] = p.Phones
			}
		}
		lex := parseLexicon(dict, prons)
		listed := func(text string, each func(word, phones string)) {
			for line := range strings.Lines(strings.TrimPrefix(text, bom)) {
				if w, ph, ok := entry(line); ok && !strings.ContainsRune(w, '(') {
					each(w, ph)
				}
			}
		}
		listed(dict, func(w, _ string) {
			ph, ok := lex.Phones(w)
			require.True(t, ok, "dictionary word %q", w)
			require.NotEmpty(t, ph)
			require.Equal(t, strings.Join(strings.Fields(ph), " "), ph, "phones of %q", w)
		})
		for w, want := range domainPhones {
			got, ok := lex.Phones(w)
			require.True(t, ok, "domain word %q", w)
			require.Equal(t, want, got, "domain word %q", w)
		}
	})
}
