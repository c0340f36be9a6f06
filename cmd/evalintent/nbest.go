package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"strconv"
	"strings"

	"github.com/voiced/voiced/internal/domain"
	"github.com/voiced/voiced/internal/pipeline"
	"github.com/voiced/voiced/internal/stages/intent"
)

// altCase is one caller question as one voice said it: its intent and the
// recogniser's N-best list, best first.
type altCase struct {
	Intent   string
	Alts     []pipeline.Hypothesis
	question string
}

// altSet is a caller question set's N-best lists for one voice.
type altSet struct {
	Name, Kind, Voice string
	Cases             []altCase
}

// nbestSets reads the N-best files of the tuning and held-out caller
// questions (domain.TuningNBestFile, domain.HeldOutNBestFile), tuning
// first, one set per voice; missing files are skipped.
func nbestSets(d *domain.Domain, heldout bool) ([]altSet, error) {
	var sets []altSet
	for _, f := range []struct{ questions, nbest, kind string }{
		{domain.TuningFile, domain.TuningNBestFile, "tuning"},
		{domain.HeldOutFile, domain.HeldOutNBestFile, "held-out"},
	} {
		if f.kind == "held-out" && !heldout {
			continue
		}
		data, err := d.ReadFile(f.nbest)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		cases, err := d.RetrievalEvalFile(f.questions)
		if err != nil {
			return nil, err
		}
		s, err := parseNBest(string(data), cases)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f.nbest, err)
		}
		for i := range s {
			s[i].Name, s[i].Kind = f.questions+" N-best, "+s[i].Voice, f.kind
		}
		sets = append(sets, s...)
	}
	return sets, nil
}

// parseNBest parses an N-best file (voice, question, score, hypothesis per
// line, an utterance's lines together, best first) into one set per voice
// in the order of the file. Questions no longer in cases are skipped.
func parseNBest(data string, cases []domain.RetrievalCase) ([]altSet, error) {
	intentOf := make(map[string]string, len(cases))
	for _, c := range cases {
		intentOf[c.Question] = c.Intent
	}
	var sets []altSet
	at := map[string]int{}
	n := 0
	for line := range strings.Lines(data) {
		n++
		line = strings.TrimRight(line, "\r\n")
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Split(line, "\t")
		if len(f) != 4 {
			return nil, fmt.Errorf("line %d: want voice, question, score and hypothesis separated by tabs", n)
		}
		score, err := strconv.ParseFloat(f[2], 64)
		if err != nil {
			return nil, fmt.Errorf("line %d: score: %w", n, err)
		}
		in, ok := intentOf[f[1]]
		if !ok {
			continue
		}
		i, ok := at[f[0]]
		if !ok {
			i = len(sets)
			at[f[0]] = i
			sets = append(sets, altSet{Voice: f[0]})
		}
		s := &sets[i]
		h := pipeline.Hypothesis{Text: f[3], Score: score}
		// A new utterance starts when the question changes: the file
		// lists each question once per voice.
		if k := len(s.Cases); k > 0 && s.Cases[k-1].question == f[1] {
			s.Cases[k-1].Alts = append(s.Cases[k-1].Alts, h)
			continue
		}
		s.Cases = append(s.Cases, altCase{Intent: in, Alts: []pipeline.Hypothesis{h}, question: f[1]})
	}
	return sets, nil
}

// altCounts are the N and scales the tuning sweep tries.
var (
	altCounts = []int{1, 2, 3, 5, 10}
	altScales = []float64{1, 3, 10, 30, 100, 300, 1000}
)

// correctAlts reports which cases of s clf classifies right from their
// N-best lists, and how many.
func correctAlts(ctx context.Context, clf *intent.Classifier, s altSet) ([]bool, int, error) {
	right := make([]bool, len(s.Cases))
	n := 0
	for i, c := range s.Cases {
		got, err := clf.ClassifyAlternatives(ctx, c.Alts)
		if err != nil {
			return nil, 0, err
		}
		if right[i] = got.Name == c.Intent; right[i] {
			n++
		}
	}
	return right, n, nil
}

// alternatives reports intent accuracy end to end from the recogniser's
// N-best lists: the transcript alone against the classifier's weighing of
// the alternatives (its -alternatives and -alt-scale), per set and voice;
// then, on the tuning sets only, a grid over N and the scale, where those
// settings are chosen.
func alternatives(ctx context.Context, out io.Writer, d *domain.Domain, clf *intent.Classifier, heldout bool) error {
	sets, err := nbestSets(d, heldout)
	if err != nil || len(sets) == 0 {
		return err
	}
	one, err := clf.WithAlternatives(1, 0)
	if err != nil {
		return err
	}
	cfg := clf.Config()
	weighed := fmt.Sprintf("%d alternatives weighed at scale %g", cfg.Alternatives, cfg.AlternativeScale)
	if cfg.Alternatives == 1 {
		weighed = "the classifier's setting, which weighs the transcript alone (see -alternatives)"
	}
	fmt.Fprintf(out, "\nintent end to end from the recogniser's N-best lists (classifier trained on the training split): the transcript alone, and %s:\n\n", weighed)
	fmt.Fprintln(out, "| set | kind | n | hypotheses per question | transcript alone | N-best | questions fixed / broken |")
	fmt.Fprintln(out, "|---|---|---|---|---|---|---|")
	for _, s := range sets {
		ra, a, err := correctAlts(ctx, one, s)
		if err != nil {
			return err
		}
		rb, b, err := correctAlts(ctx, clf, s)
		if err != nil {
			return err
		}
		var fixed, broken int
		for i := range ra {
			switch {
			case rb[i] && !ra[i]:
				fixed++
			case ra[i] && !rb[i]:
				broken++
			}
		}
		var h int
		for _, c := range s.Cases {
			h += len(c.Alts)
		}
		n := len(s.Cases)
		fmt.Fprintf(out, "| %s | %s | %d | %.1f | %.3f (%d/%d) | **%.3f** (%d/%d) | %d / %d |\n", s.Name, s.Kind, n, float64(h)/float64(max(1, n)), ratio(a, n), a, n, ratio(b, n), b, n, fixed, broken)
	}
	tuning := slices.DeleteFunc(slices.Clone(sets), func(s altSet) bool { return s.Kind != "tuning" })
	if len(tuning) == 0 {
		return nil
	}
	header := "|"
	for _, k := range altCounts {
		header += fmt.Sprintf(" N=%d |", k)
	}
	fmt.Fprintf(out, "\nN-best weighing on the tuning sets, all voices together, by N (columns) and score scale (rows); +fixed -broken: questions right and wrong that the transcript alone got wrong and right:\n\n| scale %s\n|---|%s\n", header, strings.Repeat("---|", len(altCounts)))
	base := make([][]bool, len(tuning))
	for i, s := range tuning {
		if base[i], _, err = correctAlts(ctx, one, s); err != nil {
			return err
		}
	}
	for _, sc := range altScales {
		row := fmt.Sprintf("| %g |", sc)
		for _, k := range altCounts {
			c, err := clf.WithAlternatives(k, sc)
			if err != nil {
				return err
			}
			var right, n, fixed, broken int
			for i, s := range tuning {
				ok, r, err := correctAlts(ctx, c, s)
				if err != nil {
					return err
				}
				right, n = right+r, n+len(s.Cases)
				for j := range ok {
					switch {
					case ok[j] && !base[i][j]:
						fixed++
					case base[i][j] && !ok[j]:
						broken++
					}
				}
			}
			row += fmt.Sprintf(" %.3f (%d/%d, +%d -%d) |", ratio(right, n), right, n, fixed, broken)
		}
		fmt.Fprintln(out, row)
	}
	return nil
}
