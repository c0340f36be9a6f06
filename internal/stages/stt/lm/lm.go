// Package lm builds small n-gram language models in ARPA format from domain
// text, for the embedded speech recogniser.
//
// The model is an interpolated Witten-Bell model (Witten & Bell 1991; as in
// SRILM's -wbdiscount -interpolate): for a history h seen c(h) times with
// T(h) distinct continuations,
//
//	P(w|h) = (c(h,w) + T(h)·P(w|h')) / (c(h) + T(h))
//
// where h' drops the oldest word of h and the recursion ends in a uniform
// distribution over the vocabulary. Written as an ARPA backoff model, the
// listed n-grams carry the interpolated probabilities and the backoff weight
// of h is T(h)/(c(h)+T(h)), which makes every conditional distribution sum to
// one. Witten-Bell is chosen over Kneser-Ney because domain corpora are tiny
// (a few hundred sentences): modified Kneser-Ney's discounts are estimated
// from counts-of-counts that are too sparse to be stable there.
package lm

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strings"
)

// Sentence boundary tokens, as the recogniser expects them.
const (
	BOS = "<s>"
	EOS = "</s>"
)

// Version changes whenever the builder's output for the same input changes,
// so cached models are rebuilt.
const Version = "wb-interp-2-classes"

// ErrEmptyCorpus is returned by Build when the corpus has no words.
var ErrEmptyCorpus = errors.New("lm: corpus has no words")

// Model is an n-gram model estimated from a corpus.
type Model struct {
	order int
	vocab []string // sorted, without BOS
	// counts[n-1] maps an n-gram (words joined by a space) to its count.
	counts []map[string]int
	// hist maps a history (n-1 words joined) to its statistics.
	hist map[string]histStats
	// classes is set by BuildClasses: the words above are then words and
	// class tokens.
	classes *classInfo
}

type histStats struct {
	total, types int
}

// Build estimates a model of the given order (1 to 5; 0 means 3) from
// sentences, each already split into words (see Sentences).
func Build(sentences [][]string, order int) (*Model, error) {
	if order == 0 {
		order = 3
	}
	if order < 1 || order > 5 {
		return nil, fmt.Errorf("lm: order %d out of range 1..5", order)
	}
	m := &Model{order: order, counts: make([]map[string]int, order), hist: map[string]histStats{}}
	for i := range m.counts {
		m.counts[i] = map[string]int{}
	}
	vocab := map[string]bool{EOS: true}
	nwords := 0
	for _, s := range sentences {
		if len(s) == 0 {
			continue
		}
		toks := make([]string, 0, len(s)+2)
		toks = append(toks, BOS)
		for _, w := range s {
			if w == "" || strings.ContainsAny(w, " \t\n") || w == BOS || w == EOS {
				return nil, fmt.Errorf("lm: invalid word %q", w)
			}
			vocab[w] = true
			toks = append(toks, w)
			nwords++
		}
		toks = append(toks, EOS)
		for i := 1; i < len(toks); i++ { // every predicted position (never BOS)
			for n := 1; n <= order && i-n+1 >= 0; n++ {
				g := strings.Join(toks[i-n+1:i+1], " ")
				m.counts[n-1][g]++
			}
		}
	}
	if nwords == 0 {
		return nil, ErrEmptyCorpus
	}
	for w := range vocab {
		m.vocab = append(m.vocab, w)
	}
	slices.Sort(m.vocab)
	for n := 1; n <= order; n++ {
		for g, c := range m.counts[n-1] {
			h := history(g)
			st := m.hist[h]
			st.total += c
			st.types++
			m.hist[h] = st
		}
	}
	return m, nil
}

// history returns the n-gram without its last word ("" for a unigram).
func history(g string) string {
	if i := strings.LastIndexByte(g, ' '); i >= 0 {
		return g[:i]
	}
	return ""
}

// shorter drops the oldest word of a history.
func shorter(h string) string {
	if i := strings.IndexByte(h, ' '); i >= 0 {
		return h[i+1:]
	}
	return ""
}

// Vocabulary returns the words the model knows, sorted, without <s> and
// </s>.
func (m *Model) Vocabulary() []string {
	var out []string
	for _, t := range m.vocab {
		if t != EOS {
			out = append(out, m.expand(t)...)
		}
	}
	slices.Sort(out)
	return out
}

// Prob returns P(w | history), interpolated down to the uniform
// distribution. history holds the preceding words, oldest first; only the
// last order-1 are used.
func (m *Model) Prob(hist []string, w string) float64 {
	if len(hist) > m.order-1 {
		hist = hist[len(hist)-(m.order-1):]
	}
	toks := make([]string, len(hist))
	for i, h := range hist {
		toks[i] = m.token(h)
	}
	return m.prob(strings.Join(toks, " "), m.token(w)) * m.wordProb(w)
}

func (m *Model) prob(h, w string) float64 {
	var lower float64
	if h == "" {
		lower = 1 / float64(len(m.vocab))
	} else {
		lower = m.prob(shorter(h), w)
	}
	st, ok := m.hist[h]
	if !ok {
		return lower
	}
	g := w
	if h != "" {
		g = h + " " + w
	}
	c := m.counts[strings.Count(g, " ")][g]
	return (float64(c) + float64(st.types)*lower) / float64(st.total+st.types)
}

// backoff returns the backoff weight of the history h, the probability mass
// left for continuations not seen after it.
func (m *Model) backoff(h string) float64 {
	st, ok := m.hist[h]
	if !ok {
		return 1
	}
	return float64(st.types) / float64(st.total+st.types)
}

// Hash is a content hash of the corpus and classes as the model sees
// them, for caching built models.
func Hash(sentences [][]string, order int, classes Classes) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%d\x00", Version, order)
	for _, name := range slices.Sorted(maps.Keys(classes)) {
		fmt.Fprintf(h, "%s\x00%s\n", name, strings.Join(classes[name], " "))
	}
	for _, s := range sentences {
		io.WriteString(h, strings.Join(s, " "))
		h.Write([]byte{'\n'})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// WriteARPA writes the model in ARPA format, with log10 probabilities and
// backoff weights. <s> gets the conventional -99 probability. A class-based
// model is written expanded: each n-gram with a class is written once per
// member word (every combination, for several classes), with the class's
// probability times the last word's P(word | class) and the history's
// backoff weight, which is the same model over words.
func (m *Model) WriteARPA(w io.Writer) error {
	bw := bufio.NewWriter(w)
	lists := make([][]string, m.order)
	lists[0] = append([]string{BOS}, m.vocab...)
	for n := 2; n <= m.order; n++ {
		for g := range m.counts[n-1] {
			lists[n-1] = append(lists[n-1], g)
		}
	}
	type entry struct{ words, line string }
	out := make([][]entry, m.order)
	for n := 1; n <= m.order; n++ {
		for _, g := range lists[n-1] {
			h, last := history(g), g[strings.LastIndexByte(g, ' ')+1:]
			lp := -99.0
			if g != BOS {
				lp = math.Log10(m.prob(h, last))
			}
			bo := ""
			if n < m.order {
				if _, isHist := m.hist[g]; isHist {
					bo = fmt.Sprintf(" %.6f", math.Log10(m.backoff(g)))
				}
			}
			toks := strings.Fields(g)
			m.eachExpansion(toks, nil, func(words []string) {
				p := lp
				if g != BOS {
					p += math.Log10(m.wordProb(words[len(words)-1]))
				}
				ws := strings.Join(words, " ")
				out[n-1] = append(out[n-1], entry{ws, fmt.Sprintf("%.6f %s%s\n", p, ws, bo)})
			})
		}
		slices.SortFunc(out[n-1], func(a, b entry) int { return strings.Compare(a.words, b.words) })
	}
	fmt.Fprintf(bw, "\\data\\\n")
	for n := 1; n <= m.order; n++ {
		fmt.Fprintf(bw, "ngram %d=%d\n", n, len(out[n-1]))
	}
	for n := 1; n <= m.order; n++ {
		fmt.Fprintf(bw, "\n\\%d-grams:\n", n)
		for _, e := range out[n-1] {
			bw.WriteString(e.line)
		}
	}
	fmt.Fprintf(bw, "\n\\end\\\n")
	return bw.Flush()
}

// eachExpansion calls fn with every word sequence toks stands for.
func (m *Model) eachExpansion(toks, prefix []string, fn func([]string)) {
	if len(toks) == 0 {
		fn(prefix)
		return
	}
	for _, w := range m.expand(toks[0]) {
		m.eachExpansion(toks[1:], append(prefix[:len(prefix):len(prefix)], w), fn)
	}
}
