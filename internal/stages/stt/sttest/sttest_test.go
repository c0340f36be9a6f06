package sttest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestWordErrors(t *testing.T) {
	tests := []struct {
		ref, hyp    string
		errs, words int
	}{
		{"where is my order", "where is my order", 0, 4},
		{"where is my order", "where is order", 1, 4},
		{"where is my order", "where is my new order", 1, 4},
		{"where is my order", "were is my border", 2, 4},
		{"where is my order", "", 4, 4},
		{"", "noise", 1, 0},
	}
	for _, tt := range tests {
		e, n := WordErrors(tt.ref, tt.hyp)
		require.Equal(t, tt.errs, e, "%q vs %q", tt.ref, tt.hyp)
		require.Equal(t, tt.words, n)
	}
}

func TestUtterancesSet(t *testing.T) {
	us := Utterances()
	require.GreaterOrEqual(t, len(us), 40)
	para := 0
	ids := map[string]bool{}
	for _, u := range us {
		require.False(t, ids[u.ID], "duplicate id %s", u.ID)
		ids[u.ID] = true
		if u.Paraphrase {
			para++
		}
	}
	require.GreaterOrEqual(t, para*2, len(us), "at least half are paraphrases")
}

// The tuning set must stay apart from the evaluation set, or settings
// chosen on it would be fitted to the evaluation.
func TestTuningSetDisjoint(t *testing.T) {
	eval := map[string]bool{}
	for _, u := range Utterances() {
		eval[u.Text] = true
	}
	tuning := TuningUtterances()
	require.GreaterOrEqual(t, len(tuning), 20)
	ids := map[string]bool{}
	para := 0
	for _, u := range tuning {
		require.False(t, eval[u.Text], "tuning sentence %s %q is in the evaluation set", u.ID, u.Text)
		require.False(t, ids[u.ID], "duplicate id %s", u.ID)
		ids[u.ID] = true
		if u.Paraphrase {
			para++
		}
	}
	require.GreaterOrEqual(t, para*2, len(tuning), "at least half are paraphrases")
}

func TestSynthAndParse(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	t.Setenv("VOICED_STT_AUDIO_CACHE", t.TempDir())
	for _, v := range Voices {
		if !v.Available() {
			t.Skipf("%s not installed", v.Program)
		}
		pcm, rate, err := Synth(ctx, v, "hello there")
		require.NoError(t, err, v.Name)
		require.Contains(t, []int{8000, 16000, 22050}, rate, v.Name)
		require.Greater(t, len(pcm), rate/4, "at least a quarter second of speech")
		// Second call comes from the cache and is identical.
		pcm2, rate2, err := Synth(ctx, v, "hello there")
		require.NoError(t, err)
		require.Equal(t, rate, rate2)
		require.Equal(t, pcm, pcm2)
	}
	_, _, err := ParseWAV([]byte("RIFF0000WAVEjunk"))
	require.Error(t, err)
	_, _, err = ParseWAV(nil)
	require.Error(t, err)
}

// TestRecordingsSources checks the 16 kHz recordings of
// pocketsphinx-testdata: the LibriVox sentences and the card phrases,
// each named by its source, read from their own transcription files.
func TestRecordingsSources(t *testing.T) {
	recs, _, err := Recordings(func(string) bool { return true })
	if errors.Is(err, ErrNoRecordings) {
		t.Skip(err)
	}
	require.NoError(t, err)
	by := map[string][]Recording{}
	for _, r := range recs {
		by[r.Source] = append(by[r.Source], r)
		require.True(t, strings.HasPrefix(r.ID, r.Source+"/"), r.ID)
		require.NotEmpty(t, r.Text, r.ID)
	}
	require.NotEmpty(t, by["asterisk"])
	require.Len(t, by["librivox"], 5)
	require.Len(t, by["cards"], 5)
	for _, r := range append(by["librivox"], by["cards"]...) {
		_, rate, err := ReadWAV(r.Path)
		require.NoError(t, err)
		require.Equal(t, 16000, rate, r.ID)
	}
	require.Equal(t, "eight of spades four of clubs seven of hearts", by["cards"][4].Text)
}
