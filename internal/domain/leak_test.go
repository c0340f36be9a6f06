package domain

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/stages/stt/lm"
)

// evalText is one text of the sample domain's evaluation, with where it is.
type evalText struct{ where, text string }

// evalTexts are the sample domain's texts sorted by what evaluation may do
// with them.
type evalTexts struct {
	d *Domain
	// held is what evaluation measures and nothing may have seen: the
	// held-out caller questions and the held-out split's examples.
	held []evalText
	// seen is written text evaluation trains or tunes on: the training
	// and tuning examples, the articles' sentences, the tuning caller
	// questions and the retrieval sets.
	seen []evalText
	// trainedOnly is what evaluation trains on that is not written
	// sentences: the recogniser's transcripts in spoken.tsv and the
	// phrases (article titles and keywords) of the evaluation's classifier.
	trainedOnly []evalText
}

func loadEvalTexts(t *testing.T) evalTexts {
	t.Helper()
	d, err := Default()
	require.NoError(t, err)
	tr, err := d.Training()
	require.NoError(t, err)
	splits, err := d.Splits()
	require.NoError(t, err)
	ev := evalTexts{d: d}
	for _, in := range d.Intents {
		for _, ex := range in.Examples {
			e := evalText{fmt.Sprintf("the %s example of %s", splits[ex], in.Name), ex}
			if splits[ex] == SplitHeldOut {
				ev.held = append(ev.held, e)
			} else {
				ev.seen = append(ev.seen, e)
			}
		}
	}
	for _, a := range d.Articles {
		for _, s := range Sentences(a.Title + ".\n\n" + a.Body) {
			ev.seen = append(ev.seen, evalText{a.Path, s})
		}
	}
	for _, file := range []string{TuningFile, RetrievalEvalFile, SpokenRetrievalEvalFile, HeldOutFile} {
		cases, err := d.RetrievalEvalFile(file)
		require.NoError(t, err)
		for _, c := range cases {
			e := evalText{fmt.Sprintf("%s:%d", file, c.Line), c.Question}
			if file == HeldOutFile {
				ev.held = append(ev.held, e)
			} else {
				ev.seen = append(ev.seen, e)
			}
		}
	}
	for _, in := range tr.Intents {
		for _, v := range in.Variants {
			ev.trainedOnly = append(ev.trainedOnly, evalText{SpokenFile + " (" + v.Voice + ")", v.Text})
		}
		for _, p := range in.Phrases {
			ev.trainedOnly = append(ev.trainedOnly, evalText{"a phrase of " + in.Name, p})
		}
	}
	return ev
}

// runs returns every run of n words of s's scored words (repeatKey),
// joined by spaces.
func runs(s string, n int) []string {
	ws := strings.Fields(repeatKey(s))
	var out []string
	for i := 0; i+n <= len(ws); i++ {
		out = append(out, strings.Join(ws[i:i+n], " "))
	}
	return out
}

// nearCopyRun is the shortest run of scored words that, shared with a text
// evaluation trains or tunes on, makes a held-out text a near copy of it.
// Seven words are
// most of a caller's question: "it keeps saying wrong password when i"
// was a held-out question with "try to sign in" at the end and a tuning
// question with "log in". Shorter runs are phrasings any two questions
// on one subject share ("is there a way to cancel").
const nearCopyRun = 7

// TestHeldOutNoNearCopies: no held-out caller question shares a run of
// nearCopyRun scored words with a tuning or retrieval question or a
// training or tuning example, and no held-out split example shares one
// with a caller or retrieval question. (Split examples are not held to
// the training examples: the split is a hash of the intent's paraphrases,
// which share such runs by design.)
func TestHeldOutNoNearCopies(t *testing.T) {
	ev := loadEvalTexts(t)
	// Where each run of seen text is, callers' (eval/) and all.
	callers, all := map[string]evalText{}, map[string]evalText{}
	for _, s := range ev.seen {
		for _, r := range runs(s.text, nearCopyRun) {
			all[r] = s
			if strings.HasPrefix(s.where, "eval/") {
				callers[r] = s
			}
		}
	}
	for _, h := range ev.held {
		in := callers
		if strings.HasPrefix(h.where, HeldOutFile) {
			in = all
		}
		for _, r := range runs(h.text, nearCopyRun) {
			if s, ok := in[r]; ok {
				t.Errorf("%s %q shares %q with %s %q", h.where, h.text, r, s.where, s.text)
				break
			}
		}
	}
}

// enumerations are the word classes that list every member of a closed
// set (days, numbers, colours): that a held-out question says one of them
// tells nothing about where the list came from.
var enumerations = map[string]bool{"colour": true, "currency": true, "day": true, "month": true, "number": true, "ordinal": true, "reltime": true, "size": true}

// vetted are the words that only held-out text says but a list of the
// domain has, each with the reason it is no leak. A word added here needs
// one: a word the lists learned from the held-out set makes it seen.
var vetted = map[string]string{
	// Product and place classes, written with the class-based model
	// (b99e3e4), with no sign of the held-out set: as many of their words
	// are in the tuning questions alone as in the held-out ones alone, and
	// held-out words of the same kinds ("bowl", "sink", "columbus") are
	// not in them.
	"mugs": "product class", "pan": "product class", "pillow": "product class", "scarf": "product class",
	"vacuum": "product class", "wallet": "product class",
	"ohio": "place class", "phoenix": "place class", "paris": "abroad class",
	// Article keywords, written from the articles (a7212c8) before the
	// held-out split examples with them were (b8cea16); the ones of
	// caller questions are the articles' plain synonyms.
	"klarna":   "keyword of pay-in-installments (and so a pronunciation: the example that says it trains voiced)",
	"overseas": "keyword of international-shipping",
	"worn":     "keyword of return-policy",
	"cheaper":  "keyword of price-match",
	"failed":   "keyword of declined-payments",
	// Words of longer keywords: "wrong door", "e mail", "ways to ship",
	// "discount elsewhere".
	"door": "in a keyword of delayed-deliveries", "mail": "in a keyword of changing-your-email",
	"ways": "in a keyword of shipping-options", "elsewhere": "in a keyword of price-match",
}

// TestHeldOutOnlyWordsInNoList: a word that only held-out text says (no
// training or tuning example, article, tuning or retrieval question does)
// is in none of the domain's word lists (the classes that are not
// enumerations, the pronunciations, the articles' keywords)
// unless it is vetted with its reason: a list that names such a word was
// most likely written from the held-out set ("amex", "venmo").
func TestHeldOutOnlyWordsInNoList(t *testing.T) {
	ev := loadEvalTexts(t)
	seenWords := map[string]bool{}
	for _, s := range ev.seen {
		for _, w := range lm.Words(lm.Normalize(s.text)) {
			seenWords[w] = true
		}
	}
	heldOnly := map[string]string{}
	for _, h := range ev.held {
		for _, w := range lm.Words(lm.Normalize(h.text)) {
			if !seenWords[w] {
				heldOnly[w] = h.where
			}
		}
	}
	require.NotEmpty(t, heldOnly, "the held-out set says nothing new: the check would check nothing")

	lists := map[string][]string{} // word to the lists that have it
	for _, name := range slices.Sorted(maps.Keys(ev.d.Classes)) {
		if !enumerations[name] {
			for _, w := range ev.d.Classes[name] {
				lists[w] = append(lists[w], "class "+name)
			}
		}
	}
	prons, err := ev.d.Pronunciations()
	require.NoError(t, err)
	for _, p := range prons {
		lists[p.Word] = append(lists[p.Word], PronunciationsFile)
	}
	// Every article's keywords, not only the phrases of the intents that
	// link it: retrieval indexes them all.
	for _, a := range ev.d.Articles {
		for _, k := range a.Keywords {
			for _, w := range lm.Words(lm.Normalize(k)) {
				lists[w] = append(lists[w], "a keyword of "+a.ID+" ("+strconv.Quote(k)+")")
			}
		}
	}
	for _, w := range slices.Sorted(maps.Keys(heldOnly)) {
		if in := lists[w]; len(in) > 0 && vetted[w] == "" {
			t.Errorf("%q is said only by held-out text (%s) but is in %s", w, heldOnly[w], strings.Join(slices.Compact(in), ", "))
		}
	}
	// A vetted word that is no longer held-out-only, or in no list, is
	// taken out of the table, so it cannot hide a later leak.
	for w := range vetted {
		require.Contains(t, heldOnly, w, "%q is no longer said only by held-out text: take it out of vetted", w)
		require.NotEmpty(t, lists[w], "%q is in no list: take it out of vetted", w)
	}
}
