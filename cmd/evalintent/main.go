// Command evalintent measures the intent classifier of a domain.
//
// With a split file (eval/split.yaml) it trains on the training split of
// the intent examples only and reports, labelled apart: k-fold
// cross-validation on the training split (the training figure); accuracy
// on the tuning split and on the domain's tuning caller questions
// (eval/tuning.yaml), where settings are chosen; and accuracy on the
// held-out split and the held-out caller questions (eval/heldout.yaml),
// as text and, from eval/heldout-transcripts.tsv, as the speech recogniser
// wrote them for each voice (end to end). It then prints the tuning sets'
// accuracy at other out_of_scope thresholds and margins, the grid the
// classifier's defaults are chosen on. With the recogniser's N-best lists
// (eval/tuning-nbest.tsv, eval/heldout-nbest.tsv, from evalstt -nbest) it
// compares, per voice, the intent of the transcript alone with the
// classifier's weighing of the alternatives (-alternatives, -alt-scale),
// and prints the tuning grid over N and the score scale those are chosen
// on. Without a split file every example is training data and only the
// k-fold figure is reported.
//
//	evalintent [-domain DIR] [-k 5] [-repeats 1] [-threshold 0.35] [-l2 3e-5] [-epochs 20] [-alternatives 5] [-alt-scale 100] [-min 0.9] [-noise] [-v]
//	evalintent -write-split FILE   # write the split file for the domain's examples
//
// Without -domain it evaluates the embedded sample help-desk domain. It
// exits with status 1 when the training split's k-fold accuracy is below
// -min.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/voiced/voiced/internal/domain"
	"github.com/voiced/voiced/internal/stages/intent"
	"github.com/voiced/voiced/internal/stages/stt/lm"
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "evalintent:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("evalintent", flag.ContinueOnError)
	dir := fs.String("domain", "", "domain folder (default: the embedded help-desk sample)")
	k := fs.Int("k", 5, "number of cross-validation folds")
	threshold := fs.Float64("threshold", 0, "confidence threshold (0: the classifier's default)")
	l2 := fs.Float64("l2", 0, "L2 regularisation weight (0: the classifier's default)")
	epochs := fs.Int("epochs", 0, "training epochs (0: the classifier's default)")
	seed := fs.Uint64("seed", 0, "the classifier's training seed (0: its default)")
	models := fs.Int("models", 0, "models averaged into the classifier (0: the classifier's default)")
	minAcc := fs.Float64("min", 0.9, "fail when the training split's k-fold accuracy is below this")
	verbose := fs.Bool("v", false, "list every misclassified example")
	noise := fs.Bool("noise", true, "also measure accuracy on held-out examples with simulated recognition errors")
	repeats := fs.Int("repeats", 1, "repeat the cross-validation with this many fold seeds and report the spread")
	alts := fs.Int("alternatives", 0, "recogniser alternatives the classifier weighs, from eval/*-nbest.tsv (0: the classifier's default)")
	altScale := fs.Float64("alt-scale", 0, "scale of the alternatives' recogniser scores (0: the classifier's default)")
	dict := fs.String("dict", lm.DefaultDictionary, "pronunciation dictionary the classifier's phone features look words up in, with the domain's pronunciations over it (\"\": no phone features)")
	heldout := fs.Bool("heldout", true, "report the held-out sets (turn off while tuning, so settings are not chosen by looking at them)")
	writeSplit := fs.String("write-split", "", "write the domain's split file (eval/split.yaml) to this path and exit")
	if err := fs.Parse(args); err != nil {
		return err
	}
	full, err := domain.LoadOrDefault(*dir)
	if err != nil {
		return err
	}
	if *writeSplit != "" {
		return os.WriteFile(*writeSplit, full.SplitYAML(), 0o644)
	}
	d, err := full.Training()
	if err != nil {
		return err
	}
	cfg := intent.Config{Threshold: *threshold, L2: *l2, Epochs: *epochs, Models: *models, Seed: *seed, Known: d.KnownText(), Classes: d.Classes, Alternatives: *alts, AlternativeScale: *altScale}
	if *dict != "" {
		lex, err := full.Lexicon(*dict)
		if err != nil {
			return fmt.Errorf("%w (-dict \"\" classifies without phone features)", err)
		}
		cfg.Lexicon = lex
	}

	start := time.Now()
	clf, err := intent.New(ctx, d.Intents, cfg)
	if err != nil {
		return err
	}
	trainTime := time.Since(start)

	preds, err := intent.CrossValidate(ctx, d.Intents, cfg, *k)
	if err != nil {
		return err
	}
	report(out, d, preds, *k, trainTime, *verbose)
	acc := accuracy(preds)
	if *noise {
		if err := noisy(ctx, out, d, cfg, *k); err != nil {
			return err
		}
	}
	if *repeats > 1 {
		lo, hi, sum := acc, acc, acc
		for seed := uint64(2); seed <= uint64(*repeats); seed++ {
			c := cfg
			c.Seed = seed
			p, err := intent.CrossValidate(ctx, d.Intents, c, *k)
			if err != nil {
				return err
			}
			a := accuracy(p)
			lo, hi, sum = min(lo, a), max(hi, a), sum+a
		}
		acc = sum / float64(*repeats)
		fmt.Fprintf(out, "\n%d-fold accuracy over %d seeds: mean %.3f, min %.3f, max %.3f\n", *k, *repeats, acc, lo, hi)
	}
	if err := unseen(ctx, out, full, clf, *verbose, *heldout); err != nil {
		return err
	}
	if err := alternatives(ctx, out, full, clf, *heldout); err != nil {
		return err
	}
	if err := shipped(ctx, out, full, cfg, *verbose, *heldout); err != nil {
		return err
	}
	if acc < *minAcc {
		return fmt.Errorf("training split k-fold accuracy %.3f is below %.3f", acc, *minAcc)
	}
	return nil
}

// unseen reports the classifier trained on the training split on every
// set it has not seen: the tuning and held-out splits of the examples,
// the caller question sets as text, and the held-out questions as the
// recogniser transcribed them.
func unseen(ctx context.Context, out io.Writer, d *domain.Domain, clf *intent.Classifier, verbose, heldout bool) error {
	sets, err := UnseenSets(d)
	if err != nil {
		return err
	}
	if !heldout {
		sets = slices.DeleteFunc(sets, func(s Set) bool { return s.Kind != "tuning" })
	}
	if len(sets) == 0 {
		return nil
	}
	if err := table(ctx, out, "classifier trained on the training split, on sets it has not seen", clf, sets, verbose); err != nil {
		return err
	}
	return sweep(ctx, out, clf, sets)
}

// shipped reports the caller questions (eval/tuning.yaml, eval/heldout.yaml
// and their transcripts) against the classifier voiced itself trains: on
// every intent example of the domain and spoken.tsv, with the settings
// chosen on the tuning sets. The caller questions are in none of its
// training data, so they stay unseen; the splits of the examples are not
// reported here, since it trained on them.
func shipped(ctx context.Context, out io.Writer, full *domain.Domain, cfg intent.Config, verbose, heldout bool) error {
	sets, err := UnseenSets(full)
	if err != nil {
		return err
	}
	sets = slices.DeleteFunc(sets, func(s Set) bool { return s.Split || (!heldout && s.Kind != "tuning") })
	if len(sets) == 0 {
		return nil
	}
	cfg.Known = full.KnownText()
	cfg.Classes = full.Classes
	clf, err := intent.New(ctx, full.Intents, cfg)
	if err != nil {
		return err
	}
	return table(ctx, out, "the classifier voiced ships (trained on every intent example, as the server does), on the caller questions, which it has not seen", clf, sets, verbose)
}

// table prints clf's accuracy on each set, and with verbose every
// misclassified case.
func table(ctx context.Context, out io.Writer, title string, clf *intent.Classifier, sets []Set, verbose bool) error {
	fmt.Fprintf(out, "\n%s:\n\n", title)
	fmt.Fprintln(out, "| set | kind | n | accuracy | in scope rejected as out_of_scope | out_of_scope accepted |")
	fmt.Fprintln(out, "|---|---|---|---|---|---|")
	var wrong []string
	for _, s := range sets {
		var correct, rejected, accepted, oos int
		for _, c := range s.Cases {
			got, err := clf.Classify(ctx, c.Text)
			if err != nil {
				return err
			}
			switch {
			case got.Name == c.Intent:
				correct++
			case got.Name == intent.OutOfScope:
				rejected++
			case c.Intent == intent.OutOfScope:
				accepted++
			}
			if c.Intent == intent.OutOfScope {
				oos++
			}
			if got.Name != c.Intent && verbose {
				wrong = append(wrong, fmt.Sprintf("  %s: %-16s -> %-16s %.2f  %q", s.Name, c.Intent, got.Name, got.Confidence, c.Text))
			}
		}
		n := len(s.Cases)
		fmt.Fprintf(out, "| %s | %s | %d | **%.3f** (%d/%d) | %d/%d | %d/%d |\n", s.Name, s.Kind, n, ratio(correct, n), correct, n, rejected, n-oos, accepted, oos)
	}
	if len(wrong) > 0 {
		fmt.Fprintf(out, "\nmisclassified:\n%s\n", strings.Join(wrong, "\n"))
	}
	return nil
}

// thresholds and margins are the out_of_scope settings sweep tries (a
// negative margin is none).
var (
	thresholds = []float64{0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6}
	margins    = []float64{-1, 0.05, 0.1, 0.15, 0.2, 0.3}
)

// sweep prints the accuracy of the tuning sets at each out_of_scope
// threshold and margin: they are chosen on these sets, never on the
// held-out sets.
func sweep(ctx context.Context, out io.Writer, clf *intent.Classifier, sets []Set) error {
	var tuning []Set
	for _, s := range sets {
		if s.Kind == "tuning" {
			tuning = append(tuning, s)
		}
	}
	if len(tuning) == 0 {
		return nil
	}
	// correct counts a set's right answers at one setting.
	correct := func(s Set, t, m float64) (int, error) {
		c, err := clf.WithOutOfScope(t, m)
		if err != nil {
			return 0, err
		}
		n := 0
		for _, k := range s.Cases {
			got, err := c.Classify(ctx, k.Text)
			if err != nil {
				return 0, err
			}
			if got.Name == k.Intent {
				n++
			}
		}
		return n, nil
	}
	header := "|"
	for _, t := range thresholds {
		header += fmt.Sprintf(" %.2f |", t)
	}
	cfg := clf.Config()
	fmt.Fprintf(out, "\nout_of_scope threshold on the tuning sets at margin %.2f (accuracy; the classifier's threshold is %.2f):\n\n| set %s\n|---|%s\n",
		cfg.Margin, cfg.Threshold, header, strings.Repeat("---|", len(thresholds)))
	for _, s := range tuning {
		row := "| " + s.Name + " |"
		for _, t := range thresholds {
			c, err := correct(s, t, cfg.Margin)
			if err != nil {
				return err
			}
			row += fmt.Sprintf(" %.3f |", ratio(c, len(s.Cases)))
		}
		fmt.Fprintln(out, row)
	}
	fmt.Fprintf(out, "\nall tuning sets together, by threshold (columns) and margin of the best intent over the second (rows):\n\n| margin %s\n|---|%s\n",
		header, strings.Repeat("---|", len(thresholds)))
	for _, m := range margins {
		row := fmt.Sprintf("| %.2f |", m)
		if m < 0 {
			row = "| none |"
		}
		for _, t := range thresholds {
			var c, n int
			for _, s := range tuning {
				k, err := correct(s, t, m)
				if err != nil {
					return err
				}
				c, n = c+k, n+len(s.Cases)
			}
			row += fmt.Sprintf(" %.3f (%d/%d) |", ratio(c, n), c, n)
		}
		fmt.Fprintln(out, row)
	}
	return sweepUnknown(ctx, out, clf, tuning)
}

// unknownWeights and floors are the settings of the unknown-word rule
// sweepUnknown tries (negative: none).
var (
	unknownWeights = []float64{-1, 0.5, 1, 1.5, 2, 3}
	floors         = []float64{-1, 0.4, 0.3, 0.25, 0.2, 0.15, 0.1}
)

// sweepUnknown prints, for the tuning sets together, the in-scope
// questions refused and the out-of-scope ones accepted at each
// unknown-word weight (rows) and out_of_scope floor (columns), at the
// classifier's threshold and margin: the trade-off the defaults are chosen
// on.
func sweepUnknown(ctx context.Context, out io.Writer, clf *intent.Classifier, tuning []Set) error {
	cfg := clf.Config()
	header := "|"
	for _, f := range floors {
		if f < 0 {
			header += " none |"
		} else {
			header += fmt.Sprintf(" %.2f |", f)
		}
	}
	fmt.Fprintf(out, "\nall tuning sets together, by unknown-word weight (rows) and out_of_scope floor (columns), at threshold %.2f: accuracy, in scope refused, out_of_scope accepted (the classifier's weight is %.2f, floor %.2f):\n\n| weight %s\n|---|%s\n",
		cfg.Threshold, cfg.UnknownWeight, cfg.OutOfScopeFloor, header, strings.Repeat("---|", len(floors)))
	for _, w := range unknownWeights {
		row := fmt.Sprintf("| %.1f |", w)
		if w < 0 {
			row = "| none |"
		}
		for _, f := range floors {
			c, err := clf.WithUnknown(w, f)
			if err != nil {
				return err
			}
			var correct, n, refused, inScope, accepted, oos int
			for _, s := range tuning {
				for _, k := range s.Cases {
					got, err := c.Classify(ctx, k.Text)
					if err != nil {
						return err
					}
					n++
					if got.Name == k.Intent {
						correct++
					}
					if k.Intent == intent.OutOfScope {
						oos++
						if got.Name != intent.OutOfScope {
							accepted++
						}
					} else {
						inScope++
						if got.Name == intent.OutOfScope {
							refused++
						}
					}
				}
			}
			row += fmt.Sprintf(" %.3f, %d/%d, %d/%d |", ratio(correct, n), refused, inScope, accepted, oos)
		}
		fmt.Fprintln(out, row)
	}
	return nil
}

func callerSet(name, kind string, cases []domain.RetrievalCase) Set {
	s := Set{Name: name, Kind: kind}
	for _, c := range cases {
		s.Cases = append(s.Cases, Case{c.Question, c.Intent})
	}
	return s
}

// Case is one labelled text of an evaluation set.
type Case struct{ Text, Intent string }

// Set is a labelled evaluation set.
type Set struct {
	Name  string
	Kind  string // "tuning" or "held-out"
	Split bool   // a split of the intent examples, not caller questions
	Cases []Case
}

// UnseenSets returns the domain's evaluation sets that the training split
// does not contain, tuning sets first: the tuning and held-out splits of
// the examples, eval/tuning.yaml and eval/heldout.yaml as text, and their
// transcripts per voice. Missing files are skipped.
func UnseenSets(d *domain.Domain) ([]Set, error) {
	var sets []Set
	for _, sp := range []struct {
		split       domain.Split
		file        string
		transcripts string
		kind        string
	}{{domain.SplitTuning, domain.TuningFile, domain.TuningTranscriptsFile, "tuning"}, {domain.SplitHeldOut, domain.HeldOutFile, domain.HeldOutTranscriptsFile, "held-out"}} {
		intents, err := d.SplitIntents(sp.split)
		if err != nil {
			return nil, err
		}
		s := Set{Name: string(sp.split) + " split (intent examples)", Kind: sp.kind, Split: true}
		for _, in := range intents {
			for _, ex := range in.Examples {
				s.Cases = append(s.Cases, Case{ex, in.Name})
			}
		}
		if len(s.Cases) > 0 {
			sets = append(sets, s)
		}
		cs, err := d.CallerSet(sp.file, sp.transcripts)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		sets = append(sets, callerSet(sp.file+" (text)", sp.kind, cs.Cases))
		for _, v := range cs.Voices {
			sets = append(sets, callerSet(sp.file+" transcribed, "+v, sp.kind, cs.Transcribed[v]))
		}
	}
	return sets, nil
}

// noisy reports the cross-validated accuracy when each held-out example
// of three words or more has one word dropped, or one word replaced by a
// random word of the domain's examples: simulated recognition errors.
// Real errors are usually a similar-sounding word, so the replacement is a
// pessimistic case.
func noisy(ctx context.Context, out io.Writer, d *domain.Domain, cfg intent.Config, k int) error {
	var vocab []string
	seen := map[string]bool{}
	for _, in := range d.Intents {
		for _, ex := range in.Examples {
			for _, w := range strings.Fields(ex) {
				if !seen[w] {
					seen[w] = true
					vocab = append(vocab, w)
				}
			}
		}
	}
	perturbations := []struct {
		name string
		fn   func(rng *rand.Rand, words []string) []string
	}{
		{"one word dropped", func(rng *rand.Rand, w []string) []string {
			i := rng.IntN(len(w))
			return append(w[:i:i], w[i+1:]...)
		}},
		{"one word replaced by a random domain word", func(rng *rand.Rand, w []string) []string {
			w[rng.IntN(len(w))] = vocab[rng.IntN(len(vocab))]
			return w
		}},
	}
	fmt.Fprintf(out, "\nsimulated recognition errors (examples of 3+ words, %d-fold):\n", k)
	for _, p := range perturbations {
		rng := rand.New(rand.NewPCG(7, 7))
		preds, err := intent.CrossValidateNoisy(ctx, d.Intents, cfg, k, func(text string) string {
			w := strings.Fields(text)
			if len(w) < 3 {
				return text
			}
			return strings.Join(p.fn(rng, w), " ")
		})
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "  %-42s accuracy %.3f\n", p.name+":", accuracy(preds))
	}
	return nil
}

func accuracy(preds []intent.Prediction) float64 {
	return float64(countCorrect(preds)) / float64(len(preds))
}

func report(out io.Writer, d *domain.Domain, preds []intent.Prediction, k int, trainTime time.Duration, verbose bool) {
	fmt.Fprintf(out, "domain %s: %d intents, %d training examples (training split)\n", d.Name, len(d.Intents), len(preds))
	fmt.Fprintf(out, "training on the training split: %s\n", trainTime.Round(time.Millisecond))
	fmt.Fprintf(out, "training split, %d-fold cross-validation accuracy: %.3f (%d/%d)\n\n", k, accuracy(preds), countCorrect(preds), len(preds))

	names := make([]string, 0, len(d.Intents))
	for _, in := range d.Intents {
		if len(in.Examples) > 0 {
			names = append(names, in.Name)
		}
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "intent\tsupport\tprecision\trecall\tF1\t")
	for _, n := range names {
		var tp, fp, fn int
		for _, p := range preds {
			switch {
			case p.Intent == n && p.Predicted == n:
				tp++
			case p.Predicted == n:
				fp++
			case p.Intent == n:
				fn++
			}
		}
		prec, rec := ratio(tp, tp+fp), ratio(tp, tp+fn)
		f1 := 0.0
		if prec+rec > 0 {
			f1 = 2 * prec * rec / (prec + rec)
		}
		fmt.Fprintf(tw, "%s\t%d\t%.3f\t%.3f\t%.3f\t\n", n, tp+fn, prec, rec, f1)
	}
	tw.Flush()

	fmt.Fprintf(out, "\ncalibration (confidence of the returned intent vs. accuracy):\n")
	tw = tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "confidence\tn\tmean conf\taccuracy\t")
	edges := []float64{0, 0.5, 0.7, 0.9, 1.0001}
	var ece float64
	for i := 0; i+1 < len(edges); i++ {
		var n, correct int
		var sum float64
		for _, p := range preds {
			if p.Confidence >= edges[i] && p.Confidence < edges[i+1] {
				n++
				sum += p.Confidence
				if p.Correct() {
					correct++
				}
			}
		}
		if n == 0 {
			continue
		}
		mean, acc := sum/float64(n), float64(correct)/float64(n)
		ece += float64(n) / float64(len(preds)) * math.Abs(mean-acc)
		fmt.Fprintf(tw, "[%.1f, %.1f)\t%d\t%.3f\t%.3f\t\n", edges[i], min(edges[i+1], 1), n, mean, acc)
	}
	tw.Flush()
	fmt.Fprintf(out, "expected calibration error: %.3f\n", ece)

	var wrong []intent.Prediction
	for _, p := range preds {
		if !p.Correct() {
			wrong = append(wrong, p)
		}
	}
	if verbose && len(wrong) > 0 {
		slices.SortFunc(wrong, func(a, b intent.Prediction) int {
			if a.Intent != b.Intent {
				if a.Intent < b.Intent {
					return -1
				}
				return 1
			}
			return 0
		})
		fmt.Fprintf(out, "\nmisclassified:\n")
		for _, p := range wrong {
			fmt.Fprintf(out, "  %-16s -> %-16s %.2f  %q\n", p.Intent, p.Predicted, p.Confidence, p.Text)
		}
	}
}

func countCorrect(preds []intent.Prediction) int {
	n := 0
	for _, p := range preds {
		if p.Correct() {
			n++
		}
	}
	return n
}

func ratio(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}
