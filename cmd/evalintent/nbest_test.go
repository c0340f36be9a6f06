package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/domain"
	"github.com/voiced/voiced/internal/pipeline"
)

func TestParseNBest(t *testing.T) {
	cases := []domain.RetrievalCase{{Question: "where is it", Intent: "order_status"}, {Question: "cancel it", Intent: "cancel_order"}}
	h := func(text string, score float64) pipeline.Hypothesis {
		return pipeline.Hypothesis{Text: text, Score: score}
	}
	tests := []struct {
		name    string
		data    string
		want    []altSet
		wantErr string
	}{
		{"empty", "# header\n\n", nil, ""},
		{"voices and questions", "# voice\tquestion\tscore\thypothesis\n" +
			"slt\twhere is it\t-1.5\twhere is it\nslt\twhere is it\t-1.7\twear is it\n" +
			"slt\tcancel it\t-2\tcancel it\n" +
			"kal\twhere is it\t-3\twhere is\n",
			[]altSet{
				{Voice: "slt", Cases: []altCase{
					{Intent: "order_status", Alts: []pipeline.Hypothesis{h("where is it", -1.5), h("wear is it", -1.7)}, question: "where is it"},
					{Intent: "cancel_order", Alts: []pipeline.Hypothesis{h("cancel it", -2)}, question: "cancel it"},
				}},
				{Voice: "kal", Cases: []altCase{{Intent: "order_status", Alts: []pipeline.Hypothesis{h("where is", -3)}, question: "where is it"}}},
			}, ""},
		{"removed question skipped", "slt\tgone\t-1\tgone\nslt\tcancel it\t-2\tcancel\n",
			[]altSet{{Voice: "slt", Cases: []altCase{{Intent: "cancel_order", Alts: []pipeline.Hypothesis{h("cancel", -2)}, question: "cancel it"}}}}, ""},
		{"an empty hypothesis", "slt\tcancel it\t-2\t\n",
			[]altSet{{Voice: "slt", Cases: []altCase{{Intent: "cancel_order", Alts: []pipeline.Hypothesis{h("", -2)}, question: "cancel it"}}}}, ""},
		{"three fields", "slt\tcancel it\tcancel\n", nil, "line 1: want voice, question, score and hypothesis"},
		{"bad score", "slt\tcancel it\tx\tcancel\n", nil, "line 1: score"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseNBest(tt.data, cases)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

// With N-best files, evalintent compares the transcript alone with the
// weighed alternatives and prints the tuning grid (never a held-out one).
func TestRunNBest(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string) {
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644))
	}
	write("intents.yaml", `intents:
  - name: weather
    examples: [is it raining, will it rain today, is it sunny, sunny tomorrow, rain this afternoon, how hot is it]
  - name: music
    examples: [play a song, play some music, next song please, turn the music up, play jazz, stop the music]
`)
	write("eval/split.yaml", "tuning:\n  weather: [rain this afternoon]\nheldout:\n  music: [stop the music]\n")
	write("eval/tuning.yaml", "questions:\n  - {question: \"will it rain\", intent: weather}\n  - {question: \"play my song\", intent: music}\n")
	write("eval/heldout.yaml", "questions:\n  - {question: \"is it hot\", intent: weather}\n")
	// The transcript of "play my song" is wrong; its alternatives are not.
	write("eval/tuning-nbest.tsv", "v\twill it rain\t-1\twill it rain\n"+
		"v\tplay my song\t-1\tsunny\nv\tplay my song\t-1.01\tplay my song\nv\tplay my song\t-1.02\tplay a song\n")
	write("eval/heldout-nbest.tsv", "v\tis it hot\t-1\tis it hot\n")
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	var out bytes.Buffer
	require.NoError(t, run(ctx, []string{"-domain", dir, "-k", "2", "-min", "0", "-noise=false", "-threshold", "-1", "-alternatives", "3", "-alt-scale", "1"}, &out))
	require.Contains(t, out.String(), "3 alternatives weighed at scale 1")
	require.Contains(t, out.String(), "| eval/tuning.yaml N-best, v | tuning | 2 | 2.0 | 0.500 (1/2) | **1.000** (2/2) | 1 / 0 |")
	require.Contains(t, out.String(), "| eval/heldout.yaml N-best, v | held-out | 1 |")
	require.Contains(t, out.String(), "| 1 | 0.500 (1/2, +0 -0) | 0.500 (1/2, +0 -0) | 1.000 (2/2, +1 -0) |")

	out.Reset()
	require.NoError(t, run(ctx, []string{"-domain", dir, "-k", "2", "-min", "0", "-noise=false", "-heldout=false"}, &out))
	require.Contains(t, out.String(), "tuning.yaml N-best")
	require.NotContains(t, out.String(), "heldout.yaml N-best", "-heldout=false leaves the held-out lists alone")
}
