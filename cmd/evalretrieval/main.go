// Command evalretrieval measures retrieval on a domain's evaluation sets
// (eval/retrieval.yaml: questions with the articles that answer them; and,
// when the domain has it, eval/retrieval-spoken.yaml: short questions as
// the speech recogniser writes them): recall@k, mean reciprocal rank, and
// query latency, for each set.
//
// With -answers (the default) it also answers every question as voiced
// does without an LLM provider (the intent classifier, retrieval and the
// extractive responder) and counts the answers that quote a sentence of an
// expected article, those that quote another article (which includes an
// article the intent also links, such as holiday hours for an opening
// hours question), and those that quote nothing (the template or the
// fallback alone).
//
//	evalretrieval [-domain DIR] [-k 3] [-min 0.9] [-min-spoken 0.9] [-answers] [-heldout] [-shipped] [-seed S] [-v]
//
// The caller question sets (eval/tuning.yaml, eval/heldout.yaml) are
// measured too, labelled tuning and held-out (-heldout=false leaves the
// held-out sets out, for tuning): recall@k, and whether the
// first source is right (the top passage's article, and the first article
// the answer quotes, is one that answers the question); their
// out_of_scope, greeting and goodbye questions count answers that quote
// any passage. The held-out set is also measured as the speech recogniser
// transcribed it, per voice (eval/heldout-transcripts.tsv). Retrieval's
// intent-linked questions and the classifier come from the training split
// of the intent examples only (eval/split.yaml); with -shipped they come
// from every example, as voiced itself builds them, and only the caller
// question sets are measured (voiced's training data holds none of them).
//
// Without -domain it evaluates the embedded sample help-desk domain. It
// exits with status 1 when recall@k of eval/retrieval.yaml or
// eval/retrieval-spoken.yaml is below its minimum (-min, -min-spoken);
// -shipped measures neither set, so those minimums do not apply.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"time"

	"github.com/voiced/voiced/internal/domain"
	"github.com/voiced/voiced/internal/pipeline"
	"github.com/voiced/voiced/internal/stages/intent"
	"github.com/voiced/voiced/internal/stages/llm/extractive"
	"github.com/voiced/voiced/internal/stages/retrieval"
	"github.com/voiced/voiced/internal/stages/stt/lm"
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "evalretrieval:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, out io.Writer) error {
	flags := flag.NewFlagSet("evalretrieval", flag.ContinueOnError)
	dir := flags.String("domain", "", "domain folder (default: the embedded help-desk sample)")
	k := flags.Int("k", 3, "passages retrieved per question")
	minRecall := flags.Float64("min", 0.9, "fail when recall@k on eval/retrieval.yaml is below this")
	minSpoken := flags.Float64("min-spoken", 0.9, "fail when recall@k on eval/retrieval-spoken.yaml is below this")
	verbose := flags.Bool("v", false, "list every question with its top passages")
	answers := flags.Bool("answers", true, "also answer each question with the intent classifier and the extractive responder")
	dict := flags.String("dict", lm.DefaultDictionary, "pronunciation dictionary the classifier's phone features look words up in, with the domain's pronunciations over it (\"\": no phone features)")
	heldout := flags.Bool("heldout", true, "report the held-out sets (turn off while tuning, so settings are not chosen by looking at them)")
	shipped := flags.Bool("shipped", false, "train the classifier and index the articles' questions on every intent example, as voiced does, and measure the caller question sets only")
	var rcfg retrieval.Config
	var ecfg extractive.Config
	var icfg intent.Config
	flags.Uint64Var(&icfg.Seed, "seed", 0, fmt.Sprintf("the classifier's training seed (0: %d), to see how much the first source depends on it", intent.DefaultSeed))
	flags.Float64Var(&icfg.OutOfScopeFloor, "oos-floor", 0, fmt.Sprintf("the classifier's out_of_scope floor (0: %v, negative: none)", intent.DefaultOutOfScopeFloor))
	flags.Float64Var(&ecfg.OverruleScore, "overrule-score", 0, fmt.Sprintf("least retrieval score with which a passage of an article the intent does not link overrules it (0: %v, negative: never)", extractive.DefaultOverruleScore))
	flags.Float64Var(&ecfg.OverruleRatio, "overrule-ratio", 0, fmt.Sprintf("the intent is overruled only while no linked passage scores this fraction of the best (0: %v)", extractive.DefaultOverruleRatio))
	flags.Float64Var(&ecfg.OverruleConfidence, "overrule-confidence", 0, fmt.Sprintf("an intent this sure is not overruled by score (0: %v)", extractive.DefaultOverruleConfidence))
	flags.Float64Var(&ecfg.MinLinkedScore, "min-linked-score", 0, fmt.Sprintf("least score with which a linked article's passage counts as found (0: %v, negative: none)", extractive.DefaultMinLinkedScore))
	flags.Float64Var(&rcfg.TitleWeight, "title-weight", 0, fmt.Sprintf("BM25 weight of a passage's article title (0: %v)", retrieval.DefaultTitleWeight))
	flags.Float64Var(&rcfg.HeadingWeight, "heading-weight", 0, fmt.Sprintf("BM25 weight of a passage's heading (0: %g)", retrieval.DefaultHeadingWeight))
	flags.Float64Var(&rcfg.QuestionWeight, "question-weight", 0, fmt.Sprintf("BM25 weight of the questions indexed with an article (0: %g)", retrieval.DefaultQuestionWeight))
	flags.Float64Var(&rcfg.SubjectWeight, "subject-weight", 0, fmt.Sprintf("weight of an article's title-and-keywords score in its passages' scores (0: %v, negative: none)", retrieval.DefaultSubjectWeight))
	flags.Float64Var(&rcfg.CommonFraction, "common-fraction", 0, fmt.Sprintf("a word in more than this fraction of the passages is left out of queries while enough others remain (0: %.3g)", retrieval.DefaultCommonFraction))
	flags.Float64Var(&rcfg.KeywordWeight, "keyword-weight", 0, fmt.Sprintf("BM25 weight of an article's keywords (0: %v)", retrieval.DefaultKeywordWeight))
	if err := flags.Parse(args); err != nil {
		return err
	}
	if *k < 1 {
		return fmt.Errorf("-k must be at least 1")
	}
	full, err := domain.LoadOrDefault(*dir)
	if err != nil {
		return err
	}
	d, err := full.Training()
	if err != nil {
		return err
	}
	if *shipped {
		d = full
	}
	if *dict != "" {
		lex, err := full.Lexicon(*dict)
		if err != nil {
			return fmt.Errorf("%w (-dict \"\" classifies without phone features)", err)
		}
		icfg.Lexicon = lex
	}
	var sets []evalSet
	if !*shipped {
		if sets, err = questionSets(d, *minRecall, *minSpoken); err != nil {
			return err
		}
	}
	start := time.Now()
	ix, err := retrieval.Open(ctx, rcfg, d.Articles)
	if err != nil {
		return err
	}
	defer ix.Close()
	fmt.Fprintf(out, "domain %s: %d articles, %d passages, index built in %s\n", d.Name, len(d.Articles), ix.Len(), time.Since(start).Round(time.Millisecond))

	var ans *answerer
	if *answers {
		if ans, err = newAnswerer(ctx, d, ix, icfg, ecfg); err != nil {
			return err
		}
	}
	var errs []error
	callers, err := callerSets(d, *heldout)
	if err != nil {
		return err
	}
	sets = append(sets, callers...)
	for _, set := range sets {
		if len(set.cases) == 0 {
			continue // the domain has no spoken set
		}
		recall, err := evaluate(ctx, ix, set.file, set.cases, *k, *verbose, out)
		if err != nil {
			return err
		}
		if ans != nil {
			if err := ans.evaluate(ctx, set.cases, *verbose, out); err != nil {
				return err
			}
		}
		if recall < set.min {
			errs = append(errs, fmt.Errorf("%s: recall@%d %.3f is below %.3f", set.file, *k, recall, set.min))
		}
	}
	return errors.Join(errs...)
}

// evalSet is one evaluation set with the recall@k it must reach (0: none).
type evalSet struct {
	file  string
	cases []domain.RetrievalCase
	min   float64
}

// questionSets returns the domain's retrieval question sets with their
// minimum recall: eval/retrieval.yaml, and eval/retrieval-spoken.yaml when
// the domain has it (empty otherwise).
func questionSets(d *domain.Domain, minRecall, minSpoken float64) ([]evalSet, error) {
	cases, err := d.RetrievalEval()
	if err != nil {
		return nil, err
	}
	spoken, err := d.RetrievalEvalFile(domain.SpokenRetrievalEvalFile)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	return []evalSet{{domain.RetrievalEvalFile, cases, minRecall}, {domain.SpokenRetrievalEvalFile, spoken, minSpoken}}, nil
}

// callerSets returns the caller question sets (tuning, and held-out unless
// heldout is false) as written and as each voice was transcribed, with
// their labels; missing files are skipped.
func callerSets(d *domain.Domain, heldout bool) ([]evalSet, error) {
	var out []evalSet
	for _, f := range []struct{ file, transcripts, label string }{{domain.TuningFile, domain.TuningTranscriptsFile, "tuning"}, {domain.HeldOutFile, domain.HeldOutTranscriptsFile, "held-out"}} {
		if f.label == "held-out" && !heldout {
			continue
		}
		cs, err := d.CallerSet(f.file, f.transcripts)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, evalSet{file: f.file + " (" + f.label + ", text)", cases: cs.Cases})
		for _, v := range cs.Voices {
			out = append(out, evalSet{file: f.file + " (" + f.label + ", transcribed by the recogniser, " + v + ")", cases: cs.Transcribed[v]})
		}
	}
	return out, nil
}

// evaluate runs the cases of one set, prints its figures and returns its
// recall@k. Cases without expected articles (out of scope) are left out.
func evaluate(ctx context.Context, ix *retrieval.Index, file string, cases []domain.RetrievalCase, k int, verbose bool, out io.Writer) (float64, error) {
	var (
		hits, first, n int
		rr             float64
		lat            []time.Duration
		lines          []string
	)
	for _, c := range cases {
		if len(c.Expect) == 0 {
			continue
		}
		n++
		t0 := time.Now()
		ps, err := ix.Retrieve(ctx, c.Question, k)
		if err != nil {
			return 0, fmt.Errorf("question %q: %w", c.Question, err)
		}
		lat = append(lat, time.Since(t0))
		rank := 0
		for i, p := range ps {
			if slices.Contains(c.Expect, domain.ArticleOf(p.ID)) {
				rank = i + 1
				break
			}
		}
		if rank > 0 {
			hits++
			rr += 1 / float64(rank)
		}
		if rank == 1 {
			first++
		}
		if verbose || rank == 0 {
			mark := "hit "
			if rank == 0 {
				mark = "MISS"
			}
			line := fmt.Sprintf("%s %q (want %v):", mark, c.Question, c.Expect)
			for _, p := range ps {
				line += fmt.Sprintf(" %s(%.1f)", p.ID, p.Score)
			}
			lines = append(lines, line)
		}
	}
	slices.Sort(lat)
	recall := float64(hits) / float64(n)
	fmt.Fprintf(out, "\n%s: %d questions\n", file, len(cases))
	if n < len(cases) {
		fmt.Fprintf(out, "with expected articles: %d\n", n)
	}
	fmt.Fprintf(out, "recall@%d: %.3f (%d/%d)\n", k, recall, hits, n)
	fmt.Fprintf(out, "first passage from an expected article: %.3f (%d/%d)\n", float64(first)/float64(n), first, n)
	fmt.Fprintf(out, "MRR@%d: %.3f\n", k, rr/float64(n))
	fmt.Fprintf(out, "query latency: p50 %s, p99 %s, max %s\n", pct(lat, 0.5), pct(lat, 0.99), lat[len(lat)-1])
	for _, l := range lines {
		fmt.Fprintln(out, l)
	}
	return recall, nil
}

func pct(d []time.Duration, q float64) time.Duration {
	return d[int(q*float64(len(d)-1))]
}

// answerer answers questions as voiced does with no LLM provider.
type answerer struct {
	clf  *intent.Classifier
	ix   *retrieval.Index
	resp *extractive.Responder
}

// newAnswerer answers with the classifier trained on d and the extractive
// responder configured by cfg (its Templater is d); icfg sets the
// classifier's rules, and its Known and Classes are d's.
func newAnswerer(ctx context.Context, d *domain.Domain, ix *retrieval.Index, icfg intent.Config, cfg extractive.Config) (*answerer, error) {
	icfg.Known, icfg.Classes = d.KnownText(), d.Classes
	clf, err := intent.New(ctx, d.Intents, icfg)
	if err != nil {
		return nil, err
	}
	cfg.Templater = d
	return &answerer{clf: clf, ix: ix, resp: extractive.New(cfg)}, nil
}

// evaluate answers the cases and prints which articles the answers quote.
func (a *answerer) evaluate(ctx context.Context, cases []domain.RetrievalCase, verbose bool, out io.Writer) error {
	var expected, other, none, firstGood, answerable, unanswerable, quotedUnanswerable int
	var lines []string
	for _, c := range cases {
		in, err := a.clf.Classify(ctx, c.Question)
		if err != nil {
			return fmt.Errorf("question %q: %w", c.Question, err)
		}
		ps, err := a.ix.Retrieve(ctx, c.Question, 3)
		if err != nil {
			return fmt.Errorf("question %q: %w", c.Question, err)
		}
		// The sources the result would carry: the passages the answer
		// quotes, in the order quoted.
		answer, sources := a.resp.Respond(pipeline.GenerateRequest{Transcript: c.Question, Intent: in, Passages: ps})
		var good, bad bool
		quoted := len(sources)
		var firstArts []string
		for i, s := range sources {
			art := domain.ArticleOf(s.ID)
			if i == 0 {
				firstArts = []string{art}
			}
			if slices.Contains(c.Expect, art) {
				good = true
			} else {
				bad = true
			}
		}
		switch {
		case quoted == 0:
			none++
		case good:
			expected++
		}
		if bad {
			other++
		}
		if len(c.Expect) == 0 {
			unanswerable++
			if quoted > 0 {
				quotedUnanswerable++
			}
		} else {
			answerable++
			if slices.ContainsFunc(firstArts, func(art string) bool { return slices.Contains(c.Expect, art) }) {
				firstGood++
			}
		}
		if verbose {
			ids := make([]string, len(sources))
			for i, s := range sources {
				ids[i] = s.ID
			}
			name := in.Name
			if in.OffTopic {
				name += ",off-topic"
			}
			lines = append(lines, fmt.Sprintf("answer %q (%s %.2f, want %v, sources %v): %s", c.Question, name, in.Confidence, c.Expect, ids, answer))
		}
	}
	n := len(cases)
	fmt.Fprintf(out, "answers citing an expected article: %d/%d; citing another article: %d/%d; citing none: %d/%d\n", expected, n, other, n, none, n)
	fmt.Fprintf(out, "answers whose first source is an expected article: %d/%d (%.1f%%)", firstGood, answerable, 100*float64(firstGood)/float64(max(answerable, 1)))
	if unanswerable > 0 {
		fmt.Fprintf(out, "; out-of-scope, greeting and goodbye answers citing a passage: %d/%d", quotedUnanswerable, unanswerable)
	}
	fmt.Fprintln(out)
	for _, l := range lines {
		fmt.Fprintln(out, l)
	}
	return nil
}
