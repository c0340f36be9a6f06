package intent

import (
	"context"
	"math"
	"slices"
	"strings"
	"unicode"

	"github.com/voiced/voiced/internal/domain"
)

// Character n-grams are taken inside word boundaries, from 3 to 5
// characters. They keep most of a phrase's features when the recogniser
// gets part of a word wrong ("pass word" / "password", "deliver" /
// "delivery"). Word bigrams tell apart phrases made of the same common words
// ("how long" a refund takes, "track my" order, "cancel my" order): on the
// sample domain's 657 training examples they raised the tuning sets'
// accuracy by 13 of 268 cases (docs/benchmarks.md; on its earlier 476
// examples they had lowered the cross-validated accuracy).
//
// Phone n-grams, from 2 to 3 phones, run across the whole utterance's
// pronunciation (Config.Lexicon), word boundaries ignored. A recognition
// error is a word that sounds like the one said: "land class" for "lamp
// last", "respond" for "refund", "net flicks" for "netflix"; it keeps
// most of the phones where it loses the letters. A word the lexicon does
// not know breaks the sequence. On the tuning sets, averaged over four
// training seeds, they raised the recogniser's transcripts by 6 (flite
// kal) and 2.5 (espeak-ng) of 184 questions each, left flite slt's as
// they were (-0.5) and cost written text 2 (docs/benchmarks.md,
// "Phones").
const (
	charMin     = 3
	charMax     = 5
	phoneMin    = 2
	phoneMax    = 3
	phoneWeight = 1.5 // the phone block's norm, against 1 for the others
)

// featurizer turns a text's words into its raw features.
type featurizer struct {
	// class maps a class word to its class feature, "#name"
	// (classFeatures); nil: no classes.
	class map[string]string
	// lex gives the phones; nil: no phone features.
	lex Lexicon
}

// words are a text's words as the features need them.
type words struct {
	// folded are in lower case without apostrophes, so "where's" and
	// "wheres" match: the words, bigrams and character n-grams and the
	// unknown-word rule use them.
	folded []string
	// said are the same words with their apostrophes, for the lexicon:
	// "we'll" is not "well", nor "i'd" "id".
	said []string
}

// budget stops the work on a text once its context ends: the pipeline
// gives a stage up at its budget's end without waiting for it, and a huge
// transcript (a megabyte takes over a second) would otherwise keep a CPU
// busy long after. It checks every checkEvery units of work (a word, a
// feature). A nil *budget (training) never stops.
type budget struct {
	ctx  context.Context
	work int
}

// checkEvery is the work between two checks of a budget's context: some
// 0.1 ms of features (a word gives a dozen or two).
const checkEvery = 1024

// spend counts n units of work and returns the context's error, checked
// once every checkEvery units.
func (b *budget) spend(n int) error {
	if b == nil {
		return nil
	}
	if b.work += n; b.work < checkEvery {
		return nil
	}
	b.work = 0
	return b.ctx.Err()
}

// split lower-cases text and splits it into words of letters, digits and
// apostrophes; a word's apostrophes are dropped from its folded form and
// kept inside its said form.
func split(text string) words {
	w, _ := splitWithin(nil, text)
	return w
}

// splitWithin is split, stopped with b's context's error when it ends.
func splitWithin(b *budget, text string) (words, error) {
	var w words
	for _, f := range domain.Words(text) {
		if err := b.spend(1); err != nil {
			return words{}, err
		}
		folded := domain.Fold(f)
		if folded == "" {
			continue
		}
		w.folded = append(w.folded, folded)
		w.said = append(w.said, strings.Trim(strings.ReplaceAll(f, "’", "'"), "'"))
	}
	return w, nil
}

// tokens is the folded words of text (split).
func tokens(text string) []string { return split(text).folded }

// add adds the features of the words w (from split) to into with their
// counts: "w:" a word or two adjacent words (separated by a space),
// "c:" a character n-gram of a word padded with spaces, "p:" a phone
// n-gram (phones separated by spaces). A word of one of the domain's word
// classes also gives its class as a word, alone and in the bigrams it is
// part of, so "where are my towels" shares "w:my #product" with "where is
// my lamp" although no example names towels. It stops with b's context's
// error when that ends.
func (fz featurizer) add(b *budget, w words, into map[string]float64) error {
	class, toks := fz.class, w.folded
	for i, t := range toks {
		if err := b.spend(1); err != nil {
			return err
		}
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
				// Per n-gram too: one word can be the whole text.
				if err := b.spend(1); err != nil {
					return err
				}
				into["c:"+string(padded[j:j+n])]++
			}
		}
	}
	if fz.lex != nil {
		return fz.addPhones(b, w.said, into)
	}
	return nil
}

// addPhones adds the phone n-grams of the pronunciation of said (words
// with their apostrophes) to into. A run of known words is one sequence;
// an unknown word ends it. The run is kept as one string, phones
// separated by spaces, so that an n-gram is a substring of it.
func (fz featurizer) addPhones(b *budget, said []string, into map[string]float64) error {
	var run strings.Builder
	var starts []int // where each phone of the run starts
	flush := func() {
		seq := run.String()
		for n := phoneMin; n <= phoneMax; n++ {
			for j := 0; j+n <= len(starts); j++ {
				end := len(seq)
				if j+n < len(starts) {
					end = starts[j+n] - 1
				}
				into["p:"+seq[starts[j]:end]]++
			}
		}
		run.Reset()
		starts = starts[:0]
	}
	for _, t := range said {
		// A word's phones are few: the lexicon knows only words.
		if err := b.spend(1); err != nil {
			return err
		}
		ph, ok := fz.lex.Phones(t)
		if !ok {
			flush()
			continue
		}
		for p := range strings.SplitSeq(ph, " ") {
			if p == "" {
				continue // an empty phone (bad spacing) would end before it starts
			}
			if run.Len() > 0 {
				run.WriteByte(' ')
			}
			starts = append(starts, run.Len())
			run.WriteString(p)
		}
	}
	flush()
	return nil
}

// Feature blocks, each L2-normalised on its own (vectorWords).
const (
	blockWord  uint8 = iota // "w:" words and word bigrams
	blockChar               // "c:" character n-grams
	blockPhone              // "p:" phone n-grams
	blocks
)

// blockOf is the block of a feature by its prefix.
func blockOf(f string) uint8 {
	switch f[0] {
	case 'w':
		return blockWord
	case 'c':
		return blockChar
	case 'p':
		return blockPhone
	}
	panic("intent: feature without a block: " + f)
}

// blockNorm is the norm each block is scaled to.
var blockNorm = [blocks]float64{blockWord: 1, blockChar: 1, blockPhone: phoneWeight}

// sparse is a feature vector: feature indices with their values.
type sparse struct {
	idx []int32
	val []float64
}

// vectorizer maps text to TF-IDF vectors over the features seen in
// training; unseen features have no component but count towards their
// block's norm (vectorWords).
type vectorizer struct {
	index map[string]int32
	idf   []float64
	// unseenIDF is the IDF of a feature in no training document.
	unseenIDF float64
	block     []uint8 // the block of feature i (blockOf)
	names     []string
	fz        featurizer
}

// newVectorizer builds the features of docs.
func newVectorizer(docs []string, fz featurizer) *vectorizer {
	df := make(map[string]int)
	counts := make(map[string]float64)
	for _, d := range docs {
		clear(counts)
		fz.add(nil, split(d), counts)
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
		block: make([]uint8, len(names)),
		names: names,
		fz:    fz,
	}
	n := float64(len(docs))
	v.unseenIDF = math.Log(1+n) + 1
	for i, f := range names {
		v.index[f] = int32(i)
		v.idf[i] = math.Log((1+n)/(1+float64(df[f]))) + 1
		v.block[i] = blockOf(f)
	}
	return v
}

// vector returns the sublinear TF-IDF vector of text. The word block (words
// and word bigrams), the character n-gram block and the phone n-gram block
// are L2-normalised separately (the phones to phoneWeight), so the many
// n-grams of a word do not drown the word itself.
func (v *vectorizer) vector(text string) sparse {
	s, _ := v.vectorWords(nil, split(text))
	return s
}

// vectorWords is vector of text already cut by split, for callers that
// need the words too. It stops with b's context's error when that ends.
func (v *vectorizer) vectorWords(b *budget, w words) (sparse, error) {
	counts := make(map[string]float64)
	if err := v.fz.add(b, w, counts); err != nil {
		return sparse{}, err
	}
	// What is left costs about what add did: one check before it.
	if err := b.spend(checkEvery); err != nil {
		return sparse{}, err
	}
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
	var norm [blocks]float64
	for _, f := range unseen {
		x := (1 + math.Log(counts[f])) * v.unseenIDF
		norm[blockOf(f)] += x * x
	}
	// Sorted indices make the sums below, and so the probabilities,
	// independent of map order.
	slices.Sort(s.idx)
	s.val = make([]float64, len(s.idx))
	for k, i := range s.idx {
		s.val[k] = (1 + math.Log(counts[v.names[i]])) * v.idf[i]
	}
	for k, x := range s.val {
		norm[v.block[s.idx[k]]] += x * x
	}
	for b := range norm {
		norm[b] = math.Sqrt(norm[b]) / blockNorm[b]
	}
	for k := range s.val {
		s.val[k] /= norm[v.block[s.idx[k]]]
	}
	return s, nil
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
