// Package turnwords tells whether a transcript so far stops at a word that
// cannot end an English sentence ("i want to return the", "my order
// number is um"): a speaker who pauses there has not finished, and a
// server turn waits for the rest (vad.Config.HoldMs).
//
// The list is small and fixed on purpose: a word belongs on it when a
// caller's sentence cannot end with it, so that a finished sentence is
// almost never held. Words that often end one ("in", "on", "up", "it",
// "that", "her", "do", "have", "can") are left out even though they also
// come mid-sentence. It was chosen on domain/helpdesk/eval/tuning.yaml
// spoken through PocketSphinx (docs/benchmarks.md, "Holding unfinished
// turns").
package turnwords

import "strings"

// unfinished are the words, as the recogniser writes them (lower case),
// after which a caller's sentence does not end. Left out because tuning
// questions end with them: "are" (where my towels are), "you" (thank
// you), "it", "do", "on", "in", "me". Kept although a sentence may end
// with them, because none of the tuning questions does and a pause after
// them was frequent: "can" and "does" (can you, does it), "when", and
// "they", which is how the recogniser mostly hears "the" before a pause.
var unfinished = map[string]bool{
	// articles and possessive determiners
	"a": true, "an": true, "the": true, "my": true, "your": true, "our": true, "their": true,
	// prepositions that take an object
	"of": true, "to": true, "for": true, "with": true, "from": true, "into": true, "at": true,
	// conjunctions
	"and": true, "or": true, "but": true, "because": true, "if": true, "when": true,
	// subjects and auxiliaries waiting for their verb or complement, and
	// contractions, which cannot end a clause
	"i": true, "they": true, "is": true, "can": true, "does": true, "i'm": true, "where's": true,
	// fillers
	"um": true, "uh": true, "er": true, "erm": true,
}

// Unfinished reports whether text's last word is one a sentence cannot
// end with. Empty text is not unfinished: nothing is known.
func Unfinished(text string) bool {
	text = strings.TrimRight(text, " \t\n.,?!")
	i := strings.LastIndexAny(text, " \t\n")
	return unfinished[strings.ToLower(text[i+1:])]
}
