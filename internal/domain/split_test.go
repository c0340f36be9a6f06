package domain

import (
	"errors"
	"io/fs"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/stages/stt/lm"
)

// The committed split is the deterministic one: regenerating it changes
// nothing (run `go run ./cmd/evalintent -write-split
// domain/helpdesk/eval/split.yaml` after editing the examples).
func TestDefaultSplitCommitted(t *testing.T) {
	d, err := Default()
	require.NoError(t, err)
	committed, err := d.ReadFile(SplitFile)
	require.NoError(t, err)
	require.Equal(t, string(d.SplitYAML()), string(committed))

	splits, err := d.Splits()
	require.NoError(t, err)
	count := map[Split]int{}
	for _, s := range splits {
		count[s]++
	}
	total := len(splits)
	require.Greater(t, count[SplitHeldOut]*20, total, "at least 5%% held out: %v", count)
	require.Greater(t, count[SplitTuning]*20, total, "at least 5%% for tuning: %v", count)
	require.Greater(t, count[SplitTrain]*10, total*7, "at least 70%% for training: %v", count)
}

// The held-out and tuning examples are not in the text evaluation trains
// on, and the caller question sets share no sentence with the domain text
// (all of it: every intent example and article sentence) or each other.
func TestDefaultHeldOutUnseen(t *testing.T) {
	d, err := Default()
	require.NoError(t, err)
	tr, err := d.Training()
	require.NoError(t, err)

	// A question is "in" a text when its words are one of the text's
	// sentences, or (with runs, four words or more) a run of words inside
	// one. Split examples are only held to the first: a short example
	// may be part of an article sentence ("cancel the whole order").
	inText := func(corpus []string, runs bool) func(string) bool {
		whole := map[string]bool{}
		var all strings.Builder
		sents, _, err := lm.ParseCorpus(corpus)
		require.NoError(t, err)
		for _, ws := range sents {
			n := strings.Join(ws, " ")
			whole[n] = true
			all.WriteString("|" + n + "|")
		}
		text := all.String()
		return func(q string) bool {
			n := lm.Normalize(q)
			if whole[n] {
				return true
			}
			return runs && len(strings.Fields(n)) >= 4 && regexp.MustCompile(`[| ]`+regexp.QuoteMeta(n)+`[| ]`).MatchString(text)
		}
	}
	inTraining := inText(tr.CorpusSentences(), false)
	for _, s := range []Split{SplitTuning, SplitHeldOut} {
		intents, err := d.SplitIntents(s)
		require.NoError(t, err)
		n := 0
		for _, in := range intents {
			for _, ex := range in.Examples {
				n++
				require.False(t, inTraining(ex), "%s example %q is in the training text", s, ex)
			}
		}
		require.Positive(t, n, s)
	}

	inDomain := inText(d.CorpusSentences(), true)
	seen := map[string]string{}
	for _, file := range []string{TuningFile, HeldOutFile} {
		cases, err := d.RetrievalEvalFile(file)
		require.NoError(t, err)
		for _, c := range cases {
			require.NotEmpty(t, c.Intent, "%s:%d has no intent", file, c.Line)
			require.False(t, inDomain(c.Question), "%s:%d %q is in the domain text", file, c.Line, c.Question)
			n := lm.Normalize(c.Question)
			prev, dup := seen[n]
			require.False(t, dup, "%s:%d %q is also in %s", file, c.Line, c.Question, prev)
			seen[n] = file
			if c.Intent == OutOfScope || c.Intent == "greeting" || c.Intent == "goodbye" {
				require.Empty(t, c.Expect, "%s:%d", file, c.Line)
			} else {
				require.NotEmpty(t, c.Expect, "%s:%d", file, c.Line)
			}
		}
		if file == HeldOutFile {
			require.GreaterOrEqual(t, len(cases), 150)
		}
	}
}

func TestSplitErrors(t *testing.T) {
	base := map[string]string{IntentsFile: goodIntents}
	tests := []struct {
		name, split string
		line        int
		message     string
	}{
		{"unknown split", "training:\n  greeting: [hi]\n", 1, `unknown field "training"`},
		{"unknown intent", "heldout:\n  nope: [hi]\n", 2, `unknown intent "nope"`},
		{"not an example", "heldout:\n  greeting: [hey]\n", 2, `"hey" is not an example of intent "greeting"`},
		{"twice", "heldout:\n  greeting: [hi]\ntuning:\n  greeting: [hi]\n", 4, "listed twice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			files := map[string]string{SplitFile: tt.split}
			for k, v := range base {
				files[k] = v
			}
			d, err := LoadFS(mapFS(files), "dom")
			require.NoError(t, err)
			_, err = d.Training()
			requireDomainError(t, err, "dom/eval/split.yaml", tt.line, tt.message)
		})
	}

	// Without a split file everything is training data.
	d, err := LoadFS(mapFS(map[string]string{IntentsFile: goodIntents, SplitFile: "heldout:\n  greeting: [hi]\n"}), "dom")
	require.NoError(t, err)
	tr, err := d.Training()
	require.NoError(t, err)
	g, _ := tr.Intent("greeting")
	require.Equal(t, []string{"hello"}, g.Examples)
	full, _ := d.Intent("greeting")
	require.Equal(t, []string{"hi", "hello"}, full.Examples, "the domain itself keeps every example")

	d, err = LoadFS(mapFS(base), "dom")
	require.NoError(t, err)
	tr, err = d.Training()
	require.NoError(t, err)
	require.Equal(t, d.Intents, tr.Intents)
	_, err = d.Transcripts(HeldOutTranscriptsFile)
	require.True(t, errors.Is(err, fs.ErrNotExist))
}

func TestTranscripts(t *testing.T) {
	d, err := LoadFS(mapFS(map[string]string{IntentsFile: goodIntents,
		HeldOutTranscriptsFile: "# header\nflite-slt\thi there\thigh there\n\nflite-kal\thi there\t\n",
		"eval/bad.tsv":         "flite-slt\tonly two\n"}), "dom")
	require.NoError(t, err)
	ts, err := d.Transcripts(HeldOutTranscriptsFile)
	require.NoError(t, err)
	require.Equal(t, []Transcript{{"flite-slt", "hi there", "high there"}, {"flite-kal", "hi there", ""}}, ts)
	_, err = d.Transcripts("eval/bad.tsv")
	var de *Error
	require.ErrorAs(t, err, &de)
	require.Equal(t, 1, de.Line)
}

func TestClasses(t *testing.T) {
	d, err := Default()
	require.NoError(t, err)
	for _, name := range []string{"product", "day", "month", "number", "ordinal", "colour", "size", "place", "abroad", "currency", "reltime"} {
		require.NotEmpty(t, d.Classes[name], name)
	}
	corpus := d.CorpusSentences()
	require.Equal(t, lm.ClassLine("abroad", d.Classes["abroad"]), corpus[len(corpus)-len(d.Classes)], "class lines come last, sorted by name")
	_, classes, err := lm.ParseCorpus(corpus)
	require.NoError(t, err)
	require.Len(t, classes, len(d.Classes))

	// Every class word can be said: the general dictionary or the
	// domain's pronunciations know it (scripts/pronounce).
	dict, err := os.ReadFile("/usr/share/pocketsphinx/model/en-us/cmudict-en-us.dict")
	if err != nil {
		t.Skip("no pocketsphinx-en-us dictionary")
	}
	prons, err := d.ReadFile(PronunciationsFile)
	require.NoError(t, err)
	known := map[string]bool{}
	for _, data := range [][]byte{dict, prons} {
		for line := range strings.Lines(string(data)) {
			w, _, _ := strings.Cut(line, " ")
			known[w] = true
		}
	}
	for name, ws := range d.Classes {
		for _, w := range ws {
			require.True(t, known[w], "class %s: no pronunciation for %q (go run ./scripts/pronounce)", name, w)
		}
	}

	tests := []struct {
		files   map[string]string
		file    string
		line    int
		message string
	}{
		{map[string]string{"classes/x.txt": "# c\nlamp\nBig Lamp\n"}, "dom/classes/x.txt", 3, "not one lower-case word"},
		{map[string]string{"classes/x.txt": "lamp\n", "classes/y.txt": "sofa\nlamp\n"}, "dom/classes/y.txt", 2, `already in class "x"`},
		{map[string]string{"classes/x.txt": "# nothing\n"}, "dom/classes/x.txt", 0, "empty class"},
		{map[string]string{"classes/X-1.txt": "lamp\n"}, "dom/classes/X-1.txt", 0, "lower-case"},
		{map[string]string{SpokenFile: "flite-slt\tnot an example\tnot an example\n"}, "dom/spoken.tsv", 1, "not an intent example"},
	}
	for _, tt := range tests {
		files := map[string]string{IntentsFile: goodIntents}
		maps.Copy(files, tt.files)
		_, err := LoadFS(mapFS(files), "dom")
		requireDomainError(t, err, tt.file, tt.line, tt.message)
	}
}

// requireDomainError checks that err is an *Error at file:line whose
// message contains msg.
func requireDomainError(t *testing.T, err error, file string, line int, msg string) {
	t.Helper()
	var de *Error
	require.ErrorAs(t, err, &de, "want %s:%d %s", file, line, msg)
	require.Equal(t, file, de.File)
	require.Equal(t, line, de.Line, "error %v", err)
	require.Contains(t, de.Msg, msg)
}

// Spoken transcripts train with their examples' split only.
func TestSpokenFollowsSplit(t *testing.T) {
	d, err := LoadFS(mapFS(map[string]string{IntentsFile: goodIntents,
		SplitFile:  "heldout:\n  greeting: [hi]\n",
		SpokenFile: "flite-slt\thi\thigh\nflite-slt\thello\thello\nflite-kal\thello\tyellow\n"}), "dom")
	require.NoError(t, err)
	g, _ := d.Intent("greeting")
	require.Len(t, g.Variants, 3)
	tr, err := d.Training()
	require.NoError(t, err)
	g, _ = tr.Intent("greeting")
	require.Equal(t, []Transcript{{"flite-slt", "hello", "hello"}, {"flite-kal", "hello", "yellow"}}, g.Variants)
	require.NotContains(t, d.CorpusSentences(), "yellow", "transcripts are not recogniser corpus")
}

// The sample's spoken.tsv is up to date with its examples and split: every
// training-split example has a transcript from each voice, and no tuning or
// held-out example has one (they must stay unseen). Empty transcripts (the
// recogniser heard nothing) are kept in the file but do not train.
func TestDefaultSpokenCoversTrainingSplit(t *testing.T) {
	d, err := Default()
	require.NoError(t, err)
	ts, err := d.Transcripts(SpokenFile)
	require.NoError(t, err)
	splits, err := d.Splits()
	require.NoError(t, err)
	voices := map[string]bool{}
	got := map[string]int{}
	for _, tr := range ts {
		require.Equal(t, SplitTrain, splits[tr.Question], "%q is not a training example", tr.Question)
		voices[tr.Voice] = true
		got[tr.Question]++
	}
	require.Len(t, voices, 2, "voices %v", voices)
	for ex, s := range splits {
		if s == SplitTrain {
			require.Equal(t, len(voices), got[ex], "transcripts of %q (make spoken.tsv again)", ex)
		}
	}
}

// Every word the sample domain's recogniser model can say has a
// pronunciation: in Debian's dictionary or in the domain's
// pronunciations.dict (`go run ./scripts/pronounce` adds the missing ones).
// A word without one is dropped from the search, so the recogniser can
// never hear it, and voiced warns about it at every start.
func TestDefaultPronounced(t *testing.T) {
	known, err := lm.DictionaryWords(lm.DefaultDictionary)
	if errors.Is(err, fs.ErrNotExist) {
		t.Skip("no pocketsphinx-en-us dictionary:", err)
	}
	require.NoError(t, err)
	d, err := LoadOrDefault("")
	require.NoError(t, err)
	prons, err := d.Pronunciations()
	require.NoError(t, err)
	for _, p := range prons {
		known[p.Word] = true
	}
	sents, classes, err := lm.ParseCorpus(d.CorpusSentences())
	require.NoError(t, err)
	model, err := lm.BuildClasses(sents, 3, classes)
	require.NoError(t, err)
	missing := slices.DeleteFunc(model.Vocabulary(), func(w string) bool { return known[w] })
	require.Empty(t, missing, "run go run ./scripts/pronounce")
}

// repeatKey is a question as a repeat of another is recognised: its
// scored words (no fillers, as word error rate scores it), with a word
// said twice in a row ("operator operator") said once.
func repeatKey(q string) string {
	return strings.Join(slices.Compact(strings.Fields(lm.Scored(q))), " ")
}

// TestHeldOutRepeatsNothing: no held-out text (caller question or
// held-out split example) is, with fillers or a repeated word added, a
// text evaluation trains or tunes on: a training or tuning example, a
// spoken.tsv transcript, a phrase the evaluation's classifier trains on, a
// tuning question or a question of the retrieval sets. "uh transfer me to
// an agent" was scored (fillers left out) as the training example
// "transfer me to an agent"; the held-out split example "what shipping
// options do you have" was a question of eval/retrieval-spoken.yaml.
func TestHeldOutRepeatsNothing(t *testing.T) {
	ev := loadEvalTexts(t)
	seen := map[string]string{}
	for _, s := range ev.seen {
		seen[repeatKey(s.text)] = s.where
	}
	for _, s := range ev.trainedOnly {
		seen[repeatKey(s.text)] = s.where
	}
	for _, h := range ev.held {
		if prev, dup := seen[repeatKey(h.text)]; dup {
			t.Errorf("%s %q repeats %s", h.where, h.text, prev)
		}
	}
}

// TestTrainingLeavesOutEvaluationPhrases: an article keyword that is also
// a tuning or held-out example ("stop my order", "free delivery") is not
// among the phrases the evaluation classifier trains on.
func TestTrainingLeavesOutEvaluationPhrases(t *testing.T) {
	d, err := Default()
	require.NoError(t, err)
	tr, err := d.Training()
	require.NoError(t, err)
	splits, err := d.Splits()
	require.NoError(t, err)
	// Each example scored once: scoring it again for every phrase made
	// this test take minutes under -race.
	evaluated := map[string]string{} // scored text -> the example
	for ex, s := range splits {
		if s != SplitTrain {
			evaluated[lm.Scored(ex)] = ex
		}
	}
	for _, in := range tr.Intents {
		for _, p := range in.Phrases {
			if ex, ok := evaluated[lm.Scored(p)]; ok {
				t.Errorf("the %s example %q is a phrase of %s", splits[ex], ex, in.Name)
			}
		}
	}
	// voiced itself keeps every keyword.
	in, ok := d.Intent("cancel_order")
	require.True(t, ok)
	require.Contains(t, in.Phrases, "stop my order")
}
