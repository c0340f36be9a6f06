// Package extractive is the embedded answer generator of voiced: no
// network, no model. It builds a short spoken answer from the intent's
// response template and the sentences of the top retrieved passages that
// best match the transcript, and streams it piece by piece. It is the
// default when no LLM provider is configured and the last-resort answer
// of the LLM chain when every provider fails or time runs out.
package extractive

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"unicode"

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
}

func (c Config) withDefaults() Config {
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

// Name and Model are what a Generation names for an extractive answer.
const (
	Name  = "extractive"
	Model = "extractive-v1"
)

// New returns a Responder.
func New(cfg Config) *Responder { return &Responder{cfg: cfg.withDefaults()} }

// Answer returns the whole answer text for req.
func (r *Responder) Answer(req pipeline.GenerateRequest) string {
	tmpl := ""
	if r.cfg.Templater != nil {
		tmpl = strings.TrimSpace(r.cfg.Templater.Template(req.Intent, req.Transcript))
	}
	sentences := r.bestSentences(req, tmpl)
	// For an unknown intent the templater gives the domain's fallback
	// ("Sorry, I didn't catch that..."), which would contradict passage
	// sentences that do answer: say it only when nothing else can be said.
	if req.Intent.Name == "" && len(sentences) > 0 {
		tmpl = ""
	}
	var parts []string
	if tmpl != "" {
		parts = append(parts, tmpl)
	}
	parts = append(parts, sentences...)
	if len(parts) == 0 {
		return r.cfg.NoAnswer
	}
	return strings.Join(parts, " ")
}

// Generate implements pipeline.Generator: it streams Answer(req) in
// pieces of a few words. It only fails when ctx is done.
func (r *Responder) Generate(ctx context.Context, req pipeline.GenerateRequest, emit func(string)) (pipeline.Generation, error) {
	gen := pipeline.Generation{Provider: Name, Model: Model}
	words := strings.Fields(r.Answer(req))
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

type candidate struct {
	text  string
	score float64
	order int // passage rank, then position, to keep a natural order
}

// bestSentences picks the passage sentences that share the most content
// words with the transcript, weighted towards higher-ranked passages.
func (r *Responder) bestSentences(req pipeline.GenerateRequest, tmpl string) []string {
	passages := slices.Clone(req.Passages)
	slices.SortStableFunc(passages, func(a, b pipeline.Passage) int { return cmp.Compare(b.Score, a.Score) })
	passages = passages[:min(len(passages), r.cfg.MaxPassages)]
	query := contentWords(req.Transcript + " " + req.Intent.Name)
	seen := contentWords(tmpl)
	var cands []candidate
	for rank, p := range passages {
		for pos, s := range Sentences(p.Text) {
			if len(s) > r.cfg.MaxSentenceChars {
				continue
			}
			words := contentWords(s)
			var hit, novel float64
			for w := range words {
				if query[w] {
					hit++
				}
				if !seen[w] {
					novel++
				}
			}
			if hit == 0 || novel == 0 {
				continue
			}
			// Reward overlap, lightly prefer earlier sentences and better passages.
			score := hit / (1 + 0.05*float64(len(words))) / (1 + 0.3*float64(rank)) / (1 + 0.1*float64(pos))
			cands = append(cands, candidate{text: s, score: score, order: rank*1000 + pos})
		}
	}
	slices.SortStableFunc(cands, func(a, b candidate) int { return cmp.Compare(b.score, a.score) })
	cands = cands[:min(len(cands), r.cfg.MaxSentences)]
	slices.SortFunc(cands, func(a, b candidate) int { return cmp.Compare(a.order, b.order) })
	out := make([]string, len(cands))
	for i, c := range cands {
		out[i] = c.text
	}
	return out
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
			if i+1 == len(line) || (line[i+1] == ' ' && i+2 < len(line) && (unicode.IsUpper(rune(line[i+2])) || unicode.IsDigit(rune(line[i+2])))) {
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
// with a crude plural/tense stem so "passwords" matches "password".
func contentWords(s string) map[string]bool {
	out := map[string]bool{}
	for _, w := range strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
		if len(w) < 2 || stopwords[w] {
			continue
		}
		for _, suf := range []string{"ing", "ed", "es", "s"} {
			if len(w) > len(suf)+3 && strings.HasSuffix(w, suf) {
				w = strings.TrimSuffix(w, suf)
				break
			}
		}
		out[w] = true
	}
	return out
}
