// Package extractive is the embedded answer generator of voiced: no
// network, no model. It builds a short spoken answer from the intent's
// response template and the sentences of the top retrieved passages that
// best match the transcript, and streams it piece by piece. It is the
// default when no LLM provider is configured and the last-resort answer
// of the LLM chain when every provider fails or time runs out.
//
// It quotes only sentences that are relevant, because a wrong sentence
// read aloud is worse than none. When the intent is known and the domain
// links it to articles, only those articles are quoted: the retrieved
// passages from them first, then the other passages of the first linked
// article (which answers the intent's usual question), so an answer does
// not depend on retrieval finding them, and those of the other linked
// articles that retrieval found. When the best retrieved linked passage is
// from an article listed after the first, the caller asked one of the
// intent's rarer questions and the template gives way to the passages, as
// below for an overruled intent. Otherwise a passage is quoted only
// when its score is at least MinScore and MinRelativeScore of the best
// one. Either way a sentence must share a content word with the
// transcript or the intent name, and bring words the answer has not said
// yet. When nothing is left, the template alone is the answer.
//
// A question the classifier calls out of scope may still be one no intent
// covers ("do gift cards expire"): a strong retrieved passage whose title
// says one of the caller's words answers it. An off-topic question finds
// none and gets the out-of-scope response alone, citing nothing.
//
// One exception: the classifier names the nearest intent even for a
// question no intent covers, such as a declined card, and that intent's
// articles and template would answer another question. When the best
// retrieved passage scores well enough, comes from an article the intent
// does not list, has one of the caller's words in its title, and shares
// more of them than every passage of the listed articles, the retrieved
// passages are quoted instead, as for an unknown intent, without the
// template. So are they when the classifier is unsure of the intent
// (confidence below OverruleConfidence) and the best retrieved passage,
// from an article the intent does not link, scores at least OverruleScore
// with no linked passage close behind: retrieval also matches article
// titles and keywords, which the classifier never saw. When no sentence of
// the overruling passages says the caller's words, the first sentence of
// the best one's article is the answer.
//
// A template that says what the best sentence says (templates often sum
// up their article) gives way to that sentence, so the answer cites the
// article it comes from; so does a template that says a sentence of an
// article retrieval found when no sentence says the caller's words, if
// that sentence says at least half of the template's words too. When
// the template says the best sentence and another article's sentence is
// quoted after it, the answer was still built from the best sentence's
// passage: it is cited first.
//
// A greeting or goodbye (an intent that is not grounded) is answered by
// its response alone, citing nothing, unless the classifier is unsure of
// it (confidence below OverruleConfidence) and the best retrieved passage
// scores at least OverruleScore: then it is a question ("can i get a call
// back tomorrow morning" as a greeting at 0.41), answered from the
// retrieved passages as one of no known intent.
package extractive

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/voiced/voiced/internal/domain"
	"github.com/voiced/voiced/internal/pipeline"
)

// Config configures a Responder. The zero value gives the documented
// defaults and no template.
type Config struct {
	// Templater gives the intent's response template; nil means none.
	Templater pipeline.Templater
	// MaxPassages is how many of the top passages are read. Default 3.
	MaxPassages int
	// MaxSentences is how many passage sentences the answer quotes. Default 2.
	MaxSentences int
	// MaxSentenceChars drops longer sentences (they read badly aloud). Default 240.
	MaxSentenceChars int
	// WordsPerPiece is how many words each emitted piece holds. Default 4.
	WordsPerPiece int
	// NoAnswer is said when there is neither a template nor a matching
	// passage. Default: a short apology offering a person.
	NoAnswer string
	// Linker gives the articles linked to an intent and their passages.
	// nil means the Templater's, when it is one (as *domain.Domain is),
	// else none.
	Linker Linker
	// Grounding tells which intents draw on the knowledge base. nil means
	// the Templater's, when it is one (as *domain.Domain is), else every
	// intent.
	Grounding Grounding
	// MinScore is the least retrieval score of a passage that is quoted
	// when the intent has no linked articles. Scores are BM25's: a passage
	// scoring below 0.5 matched only words found in about half of the
	// passages ("order" in a shop's help desk). Default 0.5; negative
	// means no minimum.
	MinScore float64
	// MinRelativeScore is the least score of a quoted passage as a
	// fraction of the best passage's, when the intent has no linked
	// articles. Default 0.5; negative means no minimum.
	MinRelativeScore float64
	// MinLinkedScore is the least retrieval score with which a passage of
	// an article the intent links counts as found by retrieval: quoted
	// before the first linked article's passages, and, from an article
	// listed after the first, taken as a sign that the caller asked one of
	// the intent's rarer questions. A lower score comes from a word found
	// in many passages alone ("ship" finds shipping costs for "do you ship
	// to vancouver"). Default 2; negative means no minimum.
	MinLinkedScore float64
	// OverruleScore is the least retrieval score with which the best
	// retrieved passage, from an article the intent does not link,
	// overrules the intent (see the package comment), with which an
	// out_of_scope answer may quote a passage whose title does not say
	// the caller's words, and with which an unsure greeting or goodbye is
	// answered from the retrieved passages. Default DefaultOverruleScore;
	// negative turns the rule off.
	OverruleScore float64
	// OverruleRatio: the intent is overruled only while no passage of its
	// linked articles was retrieved with at least this fraction of the
	// best passage's score. Default 0.5.
	OverruleRatio float64
	// OverruleConfidence: an intent classified with at least this
	// confidence is not overruled by score, nor is one with no confidence
	// (0: a classifier that gives none); the same holds for greetings and
	// goodbyes. Default 0.9.
	OverruleConfidence float64
}

// Linker links intents to the articles that answer them; *domain.Domain
// implements it from the "articles" lists of intents.yaml.
type Linker interface {
	// IntentArticles returns the ids of the articles that answer the
	// intent, nil for none.
	IntentArticles(intent string) []string
	// Passages returns the passages of an article as retrieval returns
	// them (IDs "article#n").
	Passages(article string) []pipeline.Passage
}

// Grounding tells the intents answered from the knowledge base from those
// whose response is the whole answer (greetings, goodbyes);
// *domain.Domain implements it from intents.yaml.
type Grounding interface {
	Grounded(intent string) bool
}

// Defaults of Config.
const (
	DefaultMinScore         = 0.5
	DefaultMinRelativeScore = 0.5
	DefaultMinLinkedScore   = 2
	// DefaultOverruleScore was 5 until retrieval added the articles'
	// subject scores (retrieval.Config.SubjectWeight), which raise the
	// scores of passages whose article's title or keywords the caller
	// said; chosen again on the tuning sets (`evalretrieval
	// -heldout=false -overrule-score S`): first sources of 553 in-scope
	// cases 443 at 5, 454 at 8, 456 at 9-11, 452 at 12, 449 never;
	// off-topic answers citing a passage 52 -> 44.
	DefaultOverruleScore      = 10
	DefaultOverruleRatio      = 0.5
	DefaultOverruleConfidence = 0.9
)

func (c Config) withDefaults() Config {
	if c.Linker == nil {
		c.Linker, _ = c.Templater.(Linker)
	}
	if c.Grounding == nil {
		c.Grounding, _ = c.Templater.(Grounding)
	}
	c.MinScore = cmp.Or(c.MinScore, DefaultMinScore)
	c.MinRelativeScore = cmp.Or(c.MinRelativeScore, DefaultMinRelativeScore)
	c.MinLinkedScore = cmp.Or(c.MinLinkedScore, DefaultMinLinkedScore)
	c.OverruleScore = cmp.Or(c.OverruleScore, DefaultOverruleScore)
	c.OverruleRatio = cmp.Or(c.OverruleRatio, DefaultOverruleRatio)
	c.OverruleConfidence = cmp.Or(c.OverruleConfidence, DefaultOverruleConfidence)
	c.MaxPassages = cmp.Or(c.MaxPassages, 3)
	c.MaxSentences = cmp.Or(c.MaxSentences, 2)
	c.MaxSentenceChars = cmp.Or(c.MaxSentenceChars, 240)
	c.WordsPerPiece = cmp.Or(c.WordsPerPiece, 4)
	c.NoAnswer = cmp.Or(c.NoAnswer, "Sorry, I don't have an answer to that right now. I can connect you to a person who can help.")
	return c
}

// Responder is the extractive answer generator. It is safe for
// concurrent use.
type Responder struct {
	cfg Config
}

var _ pipeline.Generator = (*Responder)(nil)

// OutOfScope is the intent name the classifier gives when nothing fits
// (domain.OutOfScope): like no intent, its template is an apology.
const OutOfScope = "out_of_scope"

// Name and Model are what a Generation names for an extractive answer.
const (
	Name  = "extractive"
	Model = "extractive-v1"
)

// New returns a Responder.
func New(cfg Config) *Responder { return &Responder{cfg: cfg.withDefaults()} }

// Answer returns the whole answer text for req.
func (r *Responder) Answer(req pipeline.GenerateRequest) string {
	a, _ := r.Respond(req)
	return a
}

// grounded reports whether an answer to intent may draw on passages.
func (r *Responder) grounded(intent string) bool {
	return r.cfg.Grounding == nil || r.cfg.Grounding.Grounded(intent)
}

// Respond returns the whole answer text for req and the passages it
// quotes, in the order quoted (after the one whose sentence the template
// says, citeRestated): none for a templated answer, and none for
// an intent that is not grounded (greetings, goodbyes), whose response
// alone is the answer, unless the classifier is unsure of it and
// retrieval found a strong passage (unsureUngrounded).
func (r *Responder) Respond(req pipeline.GenerateRequest) (string, []pipeline.Passage) {
	tmpl := ""
	if r.cfg.Templater != nil {
		tmpl = strings.TrimSpace(r.cfg.Templater.Template(req.Intent, req.Transcript))
	}
	if req.Intent.Name != "" && !r.grounded(req.Intent.Name) {
		if !r.unsureUngrounded(req) {
			return cmp.Or(tmpl, r.cfg.NoAnswer), nil
		}
		// An unsure greeting or goodbye beside a strong retrieved
		// passage is a question: answered as one of no known intent,
		// from the retrieved passages alone.
		req.Intent, tmpl = pipeline.Intent{}, ""
	}
	passages, contradicted := r.passages(req)
	// For an unknown or out-of-scope intent the templater gives the
	// domain's fallback ("Sorry, I didn't catch that..."), which would
	// contradict passage sentences that do answer; so would the template
	// of an intent the passages contradict. Say it only when nothing else
	// can be said.
	if req.Intent.Name == "" || req.Intent.Name == OutOfScope || contradicted {
		// Nor is the intent's name then a clue to the right sentences.
		unknown := req
		unknown.Intent = pipeline.Intent{}
		if chosen := r.bestSentences(unknown, passages, ""); len(chosen) > 0 {
			return join(nil, chosen), sources(passages, chosen)
		}
		if contradicted {
			// Retrieval found the passage by words its sentences do not
			// say (its title, its article's keywords): the article's
			// first sentence says what it is about, and the template of
			// the intent it overruled would answer another question.
			lead := r.lead(passages[0])
			if chosen := r.leading(lead); len(chosen) > 0 {
				return join(nil, chosen), []pipeline.Passage{lead}
			}
		}
		if req.Intent.Name == OutOfScope {
			// No passage answers: the response says what the assistant
			// can help with, alone. (The intent's name is no clue either:
			// its "out" would find "sent out on Monday".)
			passages = nil
		}
	}
	cands := r.scored(req, passages)
	chosen := r.pick(cands, tmpl)
	if len(chosen) == 0 && tmpl != "" {
		// The template may say what the best sentences say (a template is
		// often the article's summary: "We accept Visa, Mastercard, ...").
		// Then the sentences, not the template, are the answer, so that it
		// cites the article it comes from.
		if chosen = r.pick(cands, ""); len(chosen) > 0 && r.restates(tmpl, chosen) {
			return join(nil, chosen), sources(passages, chosen)
		}
		chosen = nil
		// No sentence says the caller's words, but the template says
		// one of an article retrieval found ("what payment methods do
		// you take": "We accept Visa, ..." says neither "payment" nor
		// "methods"): that sentence is the answer, as above. (Not when
		// retrieval overruled the intent: its template answers another
		// question.)
		if c, ok := r.restatedFound(req, tmpl, passages); ok && !contradicted {
			return c.text, []pipeline.Passage{passages[c.rank]}
		}
	}
	var parts []string
	if tmpl != "" {
		parts = append(parts, tmpl)
	}
	if len(parts)+len(chosen) == 0 {
		return r.cfg.NoAnswer, nil
	}
	return join(parts, chosen), r.citeRestated(passages, cands, tmpl, chosen)
}

// citeRestated lists the sources of an answer made of tmpl and the
// chosen sentences. When the template says what the best sentence of the
// passages says (templates sum up their article), that sentence was left
// out as said already, and another passage's was quoted after it: the
// answer was still built from the best sentence's passage, which is
// listed first ("how many days do i have to return a dress": the return
// template says the return policy's "within thirty days", and the sentence
// quoted is how to start a return). cands are the passages' sentences as
// scored returns them.
func (r *Responder) citeRestated(passages []pipeline.Passage, cands []candidate, tmpl string, chosen []candidate) []pipeline.Passage {
	quoted := sources(passages, chosen)
	if tmpl == "" || len(chosen) == 0 || !r.restates(tmpl, cands[:1]) {
		return quoted
	}
	best := passages[cands[0].rank]
	if domain.ArticleOf(best.ID) == domain.ArticleOf(quoted[0].ID) {
		return quoted // the article cited first is the same
	}
	return slices.Concat([]pipeline.Passage{best}, slices.DeleteFunc(quoted, func(p pipeline.Passage) bool { return p.ID == best.ID }))
}

// restatedFound returns the first sentence of passages, in their order,
// that the intent's template tmpl restates (see restates) and that says
// at least half of the template's words, from an article retrieval found
// (a passage of it retrieved with MinLinkedScore): the caller's words
// found the article by its title or keywords, and the template says its
// sentence. The sentence replaces the template, so it must say what the
// template says, not only share a word or two with it: "You can pay for
// one order with a gift card and a card together" is mostly the payment
// template's words, and would answer "what payment methods do you take"
// without the methods. An off-topic question the classifier put under
// the intent finds none of its articles, and keeps the template alone,
// citing nothing.
func (r *Responder) restatedFound(req pipeline.GenerateRequest, tmpl string, passages []pipeline.Passage) (candidate, bool) {
	if req.Intent.Name == "" || req.Intent.Name == OutOfScope {
		return candidate{}, false // tmpl is the domain's fallback
	}
	said := contentWords(tmpl)
	for rank, p := range passages {
		if !r.retrievedArticle(req.Passages, domain.ArticleOf(p.ID)) {
			continue
		}
		for pos, s := range Sentences(p.Text) {
			c := candidate{text: s, words: contentWords(s), rank: rank, pos: pos}
			if len(s) <= r.cfg.MaxSentenceChars && len(c.words) > 0 && r.restates(tmpl, []candidate{c}) && saysHalf(c.words, said) {
				return c, true
			}
		}
	}
	return candidate{}, false
}

// saysHalf reports whether words hold at least half of the words of want.
func saysHalf(words, want map[string]bool) bool {
	n := 0
	for w := range want {
		if words[w] {
			n++
		}
	}
	return 2*n >= len(want)
}

// retrievedArticle reports whether retrieval found a passage of article
// (see found).
func (r *Responder) retrievedArticle(retrieved []pipeline.Passage, article string) bool {
	return slices.ContainsFunc(retrieved, func(p pipeline.Passage) bool {
		return domain.ArticleOf(p.ID) == article && r.found(p)
	})
}

// unsureUngrounded reports whether an ungrounded intent (a greeting or
// goodbye) is one the classifier is unsure of (confidence above 0 and
// below OverruleConfidence) while a retrieved passage scores at least
// OverruleScore: "can i get a call back tomorrow morning" classified a
// greeting at 0.41 finds "Contacting us" at 13. The same evidence
// overrules an unsure grounded intent (overrules).
func (r *Responder) unsureUngrounded(req pipeline.GenerateRequest) bool {
	if r.cfg.OverruleScore < 0 || req.Intent.Confidence <= 0 || req.Intent.Confidence >= r.cfg.OverruleConfidence {
		return false
	}
	for _, p := range req.Passages {
		if p.Score >= r.cfg.OverruleScore {
			return true
		}
	}
	return false
}

// lead returns the first passage of p's article, which opens with what
// the article answers; p itself when the Linker does not know the article.
// (Passages matched only by their article's title and keywords tie, and
// BM25 then prefers the shortest, not the first.)
func (r *Responder) lead(p pipeline.Passage) pipeline.Passage {
	if r.cfg.Linker != nil {
		if ps := r.cfg.Linker.Passages(domain.ArticleOf(p.ID)); len(ps) > 0 {
			return ps[0]
		}
	}
	return p
}

// leading returns the first sentence of p that is not too long to read
// aloud, as the one chosen sentence.
func (r *Responder) leading(p pipeline.Passage) []candidate {
	for pos, s := range Sentences(p.Text) {
		if len(s) <= r.cfg.MaxSentenceChars {
			return []candidate{{text: s, words: contentWords(s), pos: pos}}
		}
	}
	return nil
}

// restates reports whether the first chosen sentence says mostly what the
// template says: at least half of its content words are the template's.
func (r *Responder) restates(tmpl string, chosen []candidate) bool {
	said := contentWords(tmpl)
	n := 0
	for w := range chosen[0].words {
		if said[w] {
			n++
		}
	}
	return 2*n >= len(chosen[0].words)
}

// join appends the chosen sentences to parts and joins them.
func join(parts []string, chosen []candidate) string {
	for _, c := range chosen {
		parts = append(parts, c.text)
	}
	return strings.Join(parts, " ")
}

// sources lists the passages the chosen sentences come from, each once,
// in the order quoted.
func sources(passages []pipeline.Passage, chosen []candidate) []pipeline.Passage {
	var out []pipeline.Passage
	seen := make(map[int]bool)
	for _, c := range chosen {
		if !seen[c.rank] {
			seen[c.rank] = true
			out = append(out, passages[c.rank])
		}
	}
	return out
}

// Generate implements pipeline.Generator: it streams Answer(req) in
// pieces of a few words. It only fails when ctx is done.
func (r *Responder) Generate(ctx context.Context, req pipeline.GenerateRequest, emit func(string)) (pipeline.Generation, error) {
	gen := pipeline.Generation{Provider: Name, Model: Model}
	if err := ctx.Err(); err != nil {
		return gen, context.Cause(ctx) // nothing started: no Started either
	}
	answer, src := r.Respond(req)
	gen.Sources = src
	words := strings.Fields(answer)
	if req.Started != nil && len(words) > 0 {
		req.Started(gen)
	}
	for i := 0; i < len(words); i += r.cfg.WordsPerPiece {
		if err := ctx.Err(); err != nil {
			return gen, context.Cause(ctx)
		}
		piece := strings.Join(words[i:min(i+r.cfg.WordsPerPiece, len(words))], " ")
		if i+r.cfg.WordsPerPiece < len(words) {
			piece += " "
		}
		emit(piece)
	}
	return gen, nil
}

// Evidence returns the passages an answer to req may draw on, best first,
// chosen as the package comment says: the passages of the articles the
// intent links to, or the retrieved passages that score well enough. An
// LLM given the retrieved passages as they come would read weak ones as
// facts; the same choice serves both answerers.
func (r *Responder) Evidence(req pipeline.GenerateRequest) []pipeline.Passage {
	if req.Intent.Name != "" && !r.grounded(req.Intent.Name) {
		if !r.unsureUngrounded(req) {
			return nil
		}
		req.Intent = pipeline.Intent{} // as Respond answers it
	}
	passages, _ := r.passages(req)
	return passages
}

type candidate struct {
	text  string
	words map[string]bool
	score float64
	// rank is the passage's, pos the sentence's in it: the natural order
	// of the sentences chosen.
	rank, pos int
}

// passages returns the passages the answer may quote, best first, and
// whether they contradict the intent: see the package comment.
func (r *Responder) passages(req pipeline.GenerateRequest) (_ []pipeline.Passage, contradicted bool) {
	ranked := slices.Clone(req.Passages)
	slices.SortStableFunc(ranked, func(a, b pipeline.Passage) int { return cmp.Compare(b.Score, a.Score) })
	if req.Intent.Name == OutOfScope && req.Intent.OffTopic {
		// The classifier found the question off the topic, or could not
		// tell it from an off-topic one: another business's "is the
		// pharmacy open late" shares the words of a passage on opening
		// hours, and quoting it would answer the wrong question.
		return nil, false
	}
	strong := r.strong(ranked)
	if req.Intent.Name == OutOfScope {
		strong = r.aboutWhatWasSaid(strong, req.Transcript)
	}
	var linked []string
	if r.cfg.Linker != nil && req.Intent.Name != "" {
		linked = r.cfg.Linker.IntentArticles(req.Intent.Name)
	}
	if len(linked) == 0 {
		return strong, false
	}
	out, retrieved := r.linkedPassages(ranked, linked)
	// The intents rarely cover every article, so the classifier may
	// answer with the nearest intent ("my card got declined" as
	// payment_methods). A strong retrieved passage from another article
	// that shares more of the caller's words than any linked passage
	// is the better evidence. This is asked first: a later linked
	// article found by a word or two ("oops i ordered the backpack
	// twice" as return_item, finding faulty items at 2.3 beside "Order
	// placed by mistake" at 8.4) is no better sign of the intent than
	// its first article would be.
	if len(strong) > 0 && !slices.Contains(linked, domain.ArticleOf(strong[0].ID)) &&
		(r.overrules(req.Intent, ranked, linked) || saysMore(contentWords(req.Transcript), strong[0], out)) {
		return strong, true
	}
	// The best retrieved passage of the linked ones is from an article
	// listed after the first: the caller asked one of the intent's rarer
	// questions ("my card got declined" for payment_methods), which the
	// template, written for its usual one, does not answer.
	return out, len(retrieved) > 0 && domain.ArticleOf(out[0].ID) != linked[0]
}

// strong returns the best of ranked (sorted by score) that score close
// enough to the best, at most MaxPassages of them.
func (r *Responder) strong(ranked []pipeline.Passage) []pipeline.Passage {
	var strong []pipeline.Passage
	for _, p := range ranked {
		if len(strong) == r.cfg.MaxPassages || !r.strongEnough(p, ranked[0]) {
			break // ranked is sorted: the rest score less
		}
		strong = append(strong, p)
	}
	return strong
}

// aboutWhatWasSaid keeps, for an out_of_scope question, the passages that
// are about what was asked. The classifier says out_of_scope both for a
// question no intent covers ("do gift cards expire") and for one off the
// topic ("tell me about the history of Rome"), which shares a word or two
// with some passage ("order history"). Only a passage whose title says
// one of the caller's words is about what was asked. So does one
// retrieval scores as highly as a passage that overrules an intent: its
// article's keywords or text say several of the caller's words ("can i
// get a call back" and "Contacting a person").
func (r *Responder) aboutWhatWasSaid(strong []pipeline.Passage, transcript string) []pipeline.Passage {
	said := contentWords(transcript)
	return slices.DeleteFunc(strong, func(p pipeline.Passage) bool {
		return overlap(said, pipeline.Passage{Title: p.Title}) == 0 && (r.cfg.OverruleScore < 0 || p.Score < r.cfg.OverruleScore)
	})
}

// linkedPassages returns the candidate passages of the intent's linked
// articles, best first, and the linked articles retrieval found. The
// retrieved passages of linked articles come first. Retrieval ranks by
// the words said, which may all be common ones: the linked articles'
// other passages are candidates too, after the retrieved ones: those of
// the intent's first article, which answers its usual question, and those
// of the other linked articles that retrieval found. An intent that also
// links the articles of its rarer questions (payment_methods and declined
// payments) would otherwise quote them for its usual one ("what cards do
// you take"): the template says the first article's answer, so its
// sentences add nothing, and the rarer article's sentence would be quoted
// first. When retrieval found a later article but not the first, the
// caller asked one of the rarer questions: the first article's passages
// would only compete with the answer ("We accept Visa, Mastercard" for "my
// mastercard won't go through"), so they are left out.
func (r *Responder) linkedPassages(ranked []pipeline.Passage, linked []string) (out []pipeline.Passage, retrieved map[string]bool) {
	have := make(map[string]bool)
	retrieved = make(map[string]bool)
	for _, p := range ranked {
		if slices.Contains(linked, domain.ArticleOf(p.ID)) && len(out) < r.cfg.MaxPassages && r.found(p) {
			out = append(out, p)
			have[p.ID] = true
			retrieved[domain.ArticleOf(p.ID)] = true
		}
	}
	rarer := len(out) > 0 && domain.ArticleOf(out[0].ID) != linked[0] && !retrieved[linked[0]]
	for i, a := range linked {
		if (i > 0 || rarer) && !retrieved[a] {
			continue
		}
		for _, p := range r.cfg.Linker.Passages(a) {
			if !have[p.ID] {
				out = append(out, p)
				have[p.ID] = true
			}
		}
	}
	return out, retrieved
}

// saysMore reports whether p shares more of the caller's words than any
// of the candidates (the linked articles' passages), and its title says
// one of them too: a passage mentioning "phone number" in passing is not
// about phone numbers.
func saysMore(said map[string]bool, p pipeline.Passage, candidates []pipeline.Passage) bool {
	best := 0
	for _, q := range candidates {
		best = max(best, overlap(said, q))
	}
	return overlap(said, p) > best && overlap(said, pipeline.Passage{Title: p.Title}) > 0
}

// overrules reports whether the best retrieved passage, from an article
// the intent does not link, is strong enough evidence against an intent
// the classifier is not sure of: it scores at least OverruleScore, and no
// passage of a linked article was retrieved with OverruleRatio of its
// score. Retrieval ranks by article titles, text and keywords, so a
// caller's "my mastercard won't go through" finds "Declined payments"
// when the classifier can only offer payment_methods.
func (r *Responder) overrules(in pipeline.Intent, ranked []pipeline.Passage, linked []string) bool {
	if r.cfg.OverruleScore < 0 || in.Confidence <= 0 || in.Confidence >= r.cfg.OverruleConfidence {
		return false
	}
	best := ranked[0]
	if best.Score < r.cfg.OverruleScore {
		return false
	}
	for _, p := range ranked[1:] {
		if slices.Contains(linked, domain.ArticleOf(p.ID)) && p.Score >= r.cfg.OverruleRatio*best.Score {
			return false
		}
	}
	return true
}

// found reports whether retrieval found p, a passage of a linked article,
// by more than common words: it scores at least MinLinkedScore (no score,
// from a retriever that gives none, counts as found).
func (r *Responder) found(p pipeline.Passage) bool {
	return r.cfg.MinLinkedScore < 0 || p.Score == 0 || p.Score >= r.cfg.MinLinkedScore
}

// overlap counts the words of said in the passage's title and text.
func overlap(said map[string]bool, p pipeline.Passage) int {
	n := 0
	for w := range contentWords(p.Title + " " + p.Text) {
		if said[w] {
			n++
		}
	}
	return n
}

// strongEnough reports whether p scores enough, absolutely and relative to
// the best passage, to be quoted without a link from the intent.
func (r *Responder) strongEnough(p, best pipeline.Passage) bool {
	if r.cfg.MinScore >= 0 && p.Score < r.cfg.MinScore {
		return false
	}
	return r.cfg.MinRelativeScore < 0 || p.Score >= r.cfg.MinRelativeScore*best.Score
}

// bestSentences picks the sentences of the quotable passages that share
// the most content words with the transcript (scored, pick).
func (r *Responder) bestSentences(req pipeline.GenerateRequest, passages []pipeline.Passage, tmpl string) []candidate {
	return r.pick(r.scored(req, passages), tmpl)
}

// pick returns the best of the scored sentences cands, at most
// MaxSentences of them, in their passages' order. A sentence whose content
// words are mostly said already (by the template or a better sentence) is
// left out: read aloud, it would repeat the answer.
func (r *Responder) pick(cands []candidate, tmpl string) []candidate {
	said := contentWords(tmpl)
	var chosen []candidate
	for _, c := range cands {
		if len(chosen) == r.cfg.MaxSentences {
			break
		}
		novel := 0
		for w := range c.words {
			if !said[w] {
				novel++
			}
		}
		if 2*novel < len(c.words) {
			continue
		}
		for w := range c.words {
			said[w] = true
		}
		chosen = append(chosen, c)
	}
	slices.SortFunc(chosen, func(a, b candidate) int { return cmp.Or(cmp.Compare(a.rank, b.rank), cmp.Compare(a.pos, b.pos)) })
	return chosen
}

// scored returns the sentences of the passages that share a content word
// with the transcript or the intent's name, best first: weighted by how
// few sentences say each shared word, towards higher-ranked passages and
// earlier sentences.
func (r *Responder) scored(req pipeline.GenerateRequest, passages []pipeline.Passage) []candidate {
	query := contentWords(req.Transcript + " " + req.Intent.Name)
	var cands []candidate
	df := make(map[string]int) // sentences holding each query word
	for rank, p := range passages {
		for pos, s := range Sentences(p.Text) {
			if len(s) > r.cfg.MaxSentenceChars {
				continue
			}
			c := candidate{text: s, words: contentWords(s), rank: rank, pos: pos}
			for w := range c.words {
				if query[w] {
					df[w]++
				}
			}
			cands = append(cands, c)
		}
	}
	for i := range cands {
		c := &cands[i]
		// A query word found in few of the sentences says more about
		// which one answers ("expire" among sentences about gift cards).
		// Summed in a fixed order (rarest first), not the map's random
		// one: float sums depend on their order, and two sentences that tie
		// exactly must tie the same way every time.
		var dfs []int
		for w := range c.words {
			if query[w] {
				dfs = append(dfs, df[w])
			}
		}
		slices.Sort(dfs)
		var hit float64
		for _, n := range dfs {
			hit += 1 / float64(n)
		}
		// Reward overlap, lightly prefer earlier sentences and better
		// passages; a sentence without a query word is not an answer.
		c.score = hit / (1 + 0.05*float64(len(c.words))) / (1 + 0.3*float64(c.rank)) / (1 + 0.1*float64(c.pos))
	}
	cands = slices.DeleteFunc(cands, func(c candidate) bool { return c.score == 0 })
	slices.SortStableFunc(cands, func(a, b candidate) int { return cmp.Compare(b.score, a.score) })
	return cands
}

// Sentences splits text into sentences, dropping markdown markup (headings,
// list markers, emphasis, code ticks) that would be read aloud.
func Sentences(text string) []string {
	var out []string
	for line := range strings.Lines(text) {
		line = strings.TrimSpace(line)
		line = strings.TrimLeft(line, "#>*-+ \t")
		line = strings.NewReplacer("**", "", "__", "", "`", "").Replace(line)
		if line == "" {
			continue
		}
		start := 0
		for i := 0; i < len(line); i++ {
			c := line[i]
			if c != '.' && c != '!' && c != '?' {
				continue
			}
			// A sentence ends at .!? followed by a space and an upper-case
			// letter or digit, or at the end of the line; "e.g. this" stays.
			if i+1 == len(line) || (line[i+1] == ' ' && i+2 < len(line) && startsSentence(line[i+2:])) {
				if s := strings.TrimSpace(line[start : i+1]); s != "" {
					out = append(out, s)
				}
				start = i + 1
			}
		}
		if s := strings.TrimSpace(line[start:]); s != "" {
			if last := s[len(s)-1]; last != '.' && last != '!' && last != '?' && last != ':' {
				s += "."
			}
			out = append(out, s)
		}
	}
	return out
}

// startsSentence reports whether s starts with an upper-case letter or a
// digit (decoded: the first byte of "é" is not "Ã").
func startsSentence(s string) bool {
	r, _ := utf8.DecodeRuneInString(s)
	return unicode.IsUpper(r) || unicode.IsDigit(r)
}

var stopwords = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`a an the and or but if then so to of in on at by for with from as is are was were be been
	being it its this that these those i me my you your we our they them their he she his her can could would should will
	do does did how what when where why which who whom not no yes please hi hello hey there here about into over under
	just get got have has had may might must shall than too very want need like also any some all more most`) {
		m[w] = true
	}
	return m
}()

// contentWords returns the lower-cased words of s that are not stopwords,
// with a crude plural/tense stem so "passwords" matches "password" and
// "declined" matches "decline".
func contentWords(s string) map[string]bool {
	out := map[string]bool{}
	for _, w := range strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
		if len(w) < 2 || stopwords[w] {
			continue
		}
		out[domain.Stem(w)] = true
	}
	return out
}
