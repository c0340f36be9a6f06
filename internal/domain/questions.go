package domain

import (
	"math"
	"slices"
	"strings"
)

// subjects tells which of an intent's articles an example asks about, by
// the articles' subject phrases: their titles, keywords and class words
// (linkArticles). An example asks about an article when it says one of
// its phrases, word for word and in a row (stemmed: "declined" says
// "decline"); the phrases' words count by their rarity among the
// articles' subjects, function words not at all.
type subjects struct {
	// phrases holds each article's phrases as stemmed words, function
	// words kept: "refund to" is not said by "where is my refund".
	phrases map[string][][]string
	// idf weighs a stemmed content word by the articles whose subjects
	// say it: log(1 + articles / those).
	idf map[string]float64
}

func newSubjects(articles []Article) *subjects {
	s := &subjects{phrases: make(map[string][][]string, len(articles)), idf: make(map[string]float64)}
	df := make(map[string]int)
	for _, a := range articles {
		seen := make(map[string]bool)
		for _, phrase := range slices.Concat([]string{a.Title}, a.Keywords, a.ClassWords) {
			ws := stemmedWords(phrase)
			if len(ws) == 0 {
				continue
			}
			s.phrases[a.ID] = append(s.phrases[a.ID], ws)
			for _, w := range ws {
				if !subjectStopwords[w] && !seen[w] {
					seen[w] = true
					df[w]++
				}
			}
		}
	}
	for w, n := range df {
		s.idf[w] = math.Log(1 + float64(len(articles))/float64(n))
	}
	return s
}

// score is the weight of the content words of the article's phrases that
// the question (stemmed words) says, each counted once.
func (s *subjects) score(question []string, article string) float64 {
	covered := make(map[string]bool)
	for _, p := range s.phrases[article] {
		if inARow(question, p) {
			for _, w := range p {
				covered[w] = true
			}
		}
	}
	var sum float64
	for w := range covered {
		sum += s.idf[w] // 0 for a function word
	}
	return sum
}

// article returns the one of articles (an intent's, its first the
// intent's usual answer) that the example asks about: the first, unless
// another's phrases weigh more in it.
func (s *subjects) article(example string, articles []string) string {
	q := stemmedWords(example)
	best, top := articles[0], s.score(q, articles[0])
	for _, a := range articles[1:] {
		if sc := s.score(q, a); sc > top {
			best, top = a, sc
		}
	}
	return best
}

// inARow reports whether p's words are in q, in a row.
func inARow(q, p []string) bool {
	for i := 0; i+len(p) <= len(q); i++ {
		if slices.Equal(q[i:i+len(p)], p) {
			return true
		}
	}
	return false
}

// stemmedWords returns the words of text as the classifier reads them
// (Words, Fold), each with a plural or tense ending cut off.
func stemmedWords(text string) []string {
	var out []string
	for _, w := range Words(text) {
		if w = Fold(w); w != "" {
			out = append(out, Stem(w))
		}
	}
	return out
}

// Stem cuts a plural or tense ending, and a final e, of the lower-case
// word w, so that "declined" and "decline", "cards" and "card" are one
// word ("change", "changes", "changed" and "changing" all "chang"): a
// crude stem, enough to match a caller's word with an article's.
func Stem(w string) string {
	for _, suf := range []string{"ing", "ed", "es", "s"} {
		if len(w) > len(suf)+3 && strings.HasSuffix(w, suf) {
			w = strings.TrimSuffix(w, suf)
			break
		}
	}
	if len(w) > 4 && strings.HasSuffix(w, "e") {
		w = w[:len(w)-1]
	}
	return w
}

// subjectStopwords are function words (stemmed as stem leaves them):
// they weigh nothing in a phrase.
var subjectStopwords = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`a an the and or but if then so to of in on at by for with from as is are was were be been
	being it its this that these those i me my you your we our they them their he she his her can could would should will
	do does did how what when where why which who whom not no yes please hi hello hey there here about into over under
	just get got have has had may might must shall than too very want need like also any some all more most um uh yeah
	im ive id dont didnt wont cant isnt doesnt whats wheres`) {
		m[Stem(w)] = true
	}
	return m
}()
