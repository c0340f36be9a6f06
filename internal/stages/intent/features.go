package intent

import (
	"math"
	"slices"
	"strings"
	"unicode"
)

// Character n-grams are taken inside word boundaries, from 3 to 5
// characters. They keep most of a phrase's features when the recogniser
// gets part of a word wrong ("pass word" / "password", "deliver" /
// "delivery"). Word bigrams tell apart phrases made of the same common words
// ("how long" a refund takes, "track my" order, "cancel my" order): on the
// sample domain's 657 training examples they raised the tuning sets'
// accuracy by 13 of 268 cases (docs/benchmarks.md; on its earlier 476
// examples they had lowered the cross-validated accuracy).
const (
	charMin = 3
	charMax = 5
)

// tokens lower-cases text and splits it into words of letters and digits.
// Apostrophes are dropped inside words so "where's" and "wheres" match.
func tokens(text string) []string {
	text = strings.ToLower(text)
	text = apostrophes.Replace(text)
	return strings.FieldsFunc(text, func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
}

// apostrophes is built once: tokens runs on every Classify.
var apostrophes = strings.NewReplacer("'", "", "’", "")

// rawFeatures adds the features of the words toks (from tokens) to into
// with their counts: "w:" a word or two adjacent words (separated by a
// space), "c:" a character n-gram of a word padded with spaces. A word of
// one of the domain's word classes (class: word to "#name") also gives its
// class as a word, alone and in the bigrams it is part of, so "where are
// my towels" shares "w:my #product" with "where is my lamp" although no
// example names towels.
func rawFeatures(toks []string, class map[string]string, into map[string]float64) {
	for i, t := range toks {
		into["w:"+t]++
		c, isClass := class[t]
		if isClass {
			into["w:"+c]++
		}
		if i > 0 {
			prev := toks[i-1]
			into["w:"+prev+" "+t]++
			pc, prevClass := class[prev]
			if !prevClass {
				pc = prev
			}
			if !isClass {
				c = t
			}
			if isClass || prevClass {
				into["w:"+pc+" "+c]++
			}
		}
		padded := []rune(" " + t + " ")
		for n := charMin; n <= charMax; n++ {
			for j := 0; j+n <= len(padded); j++ {
				into["c:"+string(padded[j:j+n])]++
			}
		}
	}
}

// sparse is a feature vector: feature indices with their values.
type sparse struct {
	idx []int32
	val []float64
}

// vectorizer maps text to TF-IDF vectors over the features seen in
// training; unseen features have no component but count towards their
// block's norm (vectorTokens).
type vectorizer struct {
	index map[string]int32
	idf   []float64
	// unseenIDF is the IDF of a feature in no training document.
	unseenIDF float64
	word      []bool // whether feature i is a word or word bigram (else a character n-gram)
	names     []string
	class     map[string]string // a class word to its class feature, "#name" (rawFeatures)
}

// newVectorizer builds the features of docs; class maps the words of the
// domain's word classes to their class features (classFeatures).
func newVectorizer(docs []string, class map[string]string) *vectorizer {
	df := make(map[string]int)
	counts := make(map[string]float64)
	for _, d := range docs {
		clear(counts)
		rawFeatures(tokens(d), class, counts)
		for f := range counts {
			df[f]++
		}
	}
	names := make([]string, 0, len(df))
	for f := range df {
		names = append(names, f)
	}
	slices.Sort(names) // a stable order makes training deterministic
	v := &vectorizer{
		index: make(map[string]int32, len(names)),
		idf:   make([]float64, len(names)),
		word:  make([]bool, len(names)),
		names: names,
		class: class,
	}
	n := float64(len(docs))
	v.unseenIDF = math.Log(1+n) + 1
	for i, f := range names {
		v.index[f] = int32(i)
		v.idf[i] = math.Log((1+n)/(1+float64(df[f]))) + 1
		v.word[i] = strings.HasPrefix(f, "w:")
	}
	return v
}

// vector returns the sublinear TF-IDF vector of text. The word block (words
// and word bigrams) and the character n-gram block are L2-normalised
// separately, so the many n-grams of a word do not drown the word itself.
func (v *vectorizer) vector(text string) sparse {
	return v.vectorTokens(tokens(text))
}

// vectorTokens is vector of text already cut by tokens, for callers that
// need the words too.
func (v *vectorizer) vectorTokens(toks []string) sparse {
	counts := make(map[string]float64)
	rawFeatures(toks, v.class, counts)
	var s sparse
	// A feature training never saw counts towards its block's norm with
	// the largest IDF, as a word in no document would: a text of mostly
	// unknown words ("zxqv blorf", a recognition error) keeps only small
	// weights on the few n-grams it shares with training, rather than
	// having them scaled up to a whole vector.
	var unseen []string
	for f := range counts {
		if i, ok := v.index[f]; ok {
			s.idx = append(s.idx, i)
		} else {
			unseen = append(unseen, f)
		}
	}
	// Summed in a fixed order, as the seen ones below: float addition
	// depends on it, and the probabilities should not on map order.
	slices.Sort(unseen)
	var uw, uc float64
	for _, f := range unseen {
		x := (1 + math.Log(counts[f])) * v.unseenIDF
		if strings.HasPrefix(f, "w:") {
			uw += x * x
		} else {
			uc += x * x
		}
	}
	// Sorted indices make the sums below, and so the probabilities,
	// independent of map order.
	slices.Sort(s.idx)
	s.val = make([]float64, len(s.idx))
	for k, i := range s.idx {
		s.val[k] = (1 + math.Log(counts[v.names[i]])) * v.idf[i]
	}
	nw, nc := uw, uc
	for k, x := range s.val {
		if v.word[s.idx[k]] {
			nw += x * x
		} else {
			nc += x * x
		}
	}
	nw, nc = math.Sqrt(nw), math.Sqrt(nc)
	for k := range s.val {
		if v.word[s.idx[k]] {
			s.val[k] /= nw
		} else {
			s.val[k] /= nc
		}
	}
	return s
}

// classFeatures maps each word of classes (class name to words, as
// Config.Classes) to its class feature, "#" and the class name; nil for no
// classes.
func classFeatures(classes map[string][]string) map[string]string {
	if len(classes) == 0 {
		return nil
	}
	m := make(map[string]string)
	for name, words := range classes {
		for _, w := range words {
			if t := tokens(w); len(t) == 1 {
				m[t[0]] = "#" + name
			}
		}
	}
	return m
}

// contentWord reports whether a token (from tokens) can say what a text is
// about: three letters or more, no digits, and not a function word, a
// filler or a number word. Only content words count as unknown
// (Config.UnknownWeight): a caller's "um" or "gonna" says nothing about
// the topic, whether training saw it or not.
func contentWord(w string) bool {
	if len(w) < 3 || stopwords[w] {
		return false
	}
	return !strings.ContainsFunc(w, unicode.IsDigit)
}

// stopwords are written as tokens gives them (lower case, no apostrophes).
var stopwords = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`a an the and or but if then so to of in on at by for with from as is are was were be been
	being it its this that these those i me my you your we our they them their he she his her can could would should will
	do does did how what when where why which who whom not no yes please hi hello hey there here about into over under
	just get got have has had may might must shall than too very want need like also any some all more most
	um uh er erm ah oh hmm well okay ok yeah yep really actually maybe
	whats wheres hows whos dont cant wont im ive id youre thats theres isnt doesnt didnt hasnt havent arent wasnt
	wanna gonna gotta kinda
	one two three four five six seven eight nine ten`) {
		m[w] = true
	}
	return m
}()
