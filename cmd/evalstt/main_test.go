package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/domain"
	"github.com/voiced/voiced/internal/stages/stt/sttest"
)

// The test set's labels must hold for the domain as it is: "lit"
// sentences in its text, paraphrases not. The domain is edited by hand, so
// this catches an example added that turns a paraphrase literal.
func TestSplitMatchesDomain(t *testing.T) {
	d, err := domain.LoadOrDefault("")
	require.NoError(t, err)
	for name, set := range map[string][]sttest.Utterance{"eval": sttest.Utterances(), "tuning": sttest.TuningUtterances()} {
		require.NoError(t, checkSplit(d.CorpusSentences(), set), name)
		require.Error(t, checkSplit([]string{"where is my order"}, set), "%s: a corpus without the literal sentences fails", name)
	}
}

func TestPercentile(t *testing.T) {
	var d []time.Duration
	for i := 1; i <= 100; i++ {
		d = append(d, time.Duration(i)*time.Millisecond)
	}
	require.Equal(t, 50*time.Millisecond, pct(d, 50))
	require.Equal(t, 99*time.Millisecond, pct(d, 99))
	require.Equal(t, 100*time.Millisecond, pct(d, 100))
	require.Equal(t, time.Duration(0), pct(nil, 99))
	require.Equal(t, 7*time.Millisecond, pct([]time.Duration{7 * time.Millisecond}, 99))
}
