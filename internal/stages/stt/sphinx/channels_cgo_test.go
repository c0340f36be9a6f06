//go:build cgo && !nosphinx

package sphinx

import (
	"context"
	"errors"
	"os"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/stages/stt/lm"
	"github.com/voiced/voiced/internal/stages/stt/sttest"
)

// A decoder's model has the telephone means exactly while it decodes
// audio that arrived at 8 kHz, and the wideband ones again after (that
// the wideband transcripts come out as before is
// TestTranscriptIndependentOfHistoryAndFraming's: kal's 8 kHz audio runs
// on every decoder between them).
func TestNarrowbandTransformFollowsRate(t *testing.T) {
	skipWithoutModels(t)
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	for _, tc := range []struct {
		setting string
		want8k  bool
	}{
		{NarrowbandTelephone, true},
		{NarrowbandGeneral, false},
	} {
		t.Run(tc.setting, func(t *testing.T) {
			e, err := New(ctx, Config{Decoders: 1, CacheDir: cacheDir, NarrowbandAcoustic: tc.setting}, testCorpus(), quiet, prometheus.NewRegistry())
			require.NoError(t, err)
			defer e.Close()
			for _, step := range []struct {
				rate   int
				narrow bool
			}{{16000, false}, {8000, tc.want8k}, {8000, tc.want8k}, {48000, false}, {8000, tc.want8k}} {
				r, err := e.Start(ctx, step.rate)
				require.NoError(t, err)
				require.Equal(t, step.narrow, r.(*recognizer).d.ch == chanNarrow, "%d Hz", step.rate)
				_, err = r.Write(ctx, make([]int16, step.rate/10))
				require.NoError(t, err)
				_, err = r.Finish(ctx)
				require.NoError(t, err)
				r.Close()
			}
		})
	}
}

// People's telephone speech, which no adaptation or setting was made
// from: the telephone transform makes fewer word errors on it than the
// model as it is. On the prompts kept for measuring, 53.8% against 76.7%
// (docs/benchmarks.md, "Telephone audio"); a sample of the prompts,
// spread over all of them, keeps the test short.
func TestTelephoneTransformOnPeoplesSpeech(t *testing.T) {
	prompts := asteriskSample(t, 24)
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	general, words := wordErrorsOn(ctx, t, Config{NarrowbandAcoustic: NarrowbandGeneral}, prompts)
	telephone, _ := wordErrorsOn(ctx, t, Config{NarrowbandAcoustic: NarrowbandTelephone}, prompts)
	t.Logf("word errors on %d words: general %d, telephone %d", words, general, telephone)
	require.Less(t, telephone, general)
}

// asteriskSample returns n of Asterisk's prompts (people's speech at
// 8 kHz), spread over all of them, or skips the test without them.
func asteriskSample(t *testing.T, n int) []sttest.Recording {
	t.Helper()
	skipWithoutModels(t)
	dict, err := lm.DictionaryWords(DefaultDict)
	require.NoError(t, err)
	recs, _, err := sttest.Recordings(func(w string) bool { return dict[w] })
	if errors.Is(err, sttest.ErrNoRecordings) {
		t.Skip(err)
	}
	require.NoError(t, err)
	var all, prompts []sttest.Recording
	for _, r := range recs {
		if r.Source == "asterisk" {
			all = append(all, r)
		}
	}
	for i := range n {
		prompts = append(prompts, all[i*len(all)/n])
	}
	return prompts
}

// wordErrorsOn streams prompts through an engine of one decoder with cfg
// and returns the word errors and the words of their transcripts.
func wordErrorsOn(ctx context.Context, t *testing.T, cfg Config, prompts []sttest.Recording) (errs, words int) {
	t.Helper()
	cfg.Decoders, cfg.CacheDir = 1, cacheDir
	e, err := New(ctx, cfg, testCorpus(), quiet, prometheus.NewRegistry())
	require.NoError(t, err)
	defer e.Close()
	for _, p := range prompts {
		pcm, rate, err := sttest.ReadWAV(p.Path)
		require.NoError(t, err)
		text, _, err := stream(ctx, e, pcm, rate)
		require.NoError(t, err)
		n, w := sttest.WordErrors(lm.Normalize(p.Text), text)
		errs += n
		words += w
	}
	return errs, words
}

// BenchmarkChannelSwitch is what a decoder pays when its next utterance
// arrives at the other band: PocketSphinx reloads the means and variances
// from the model's files and transforms them.
func BenchmarkChannelSwitch(b *testing.B) {
	if _, err := os.Stat(DefaultModelDir); err != nil {
		b.Skip("pocketsphinx-en-us not installed")
	}
	ctx := b.Context()
	e, err := New(ctx, Config{Decoders: 1, CacheDir: cacheDir}, testCorpus(), quiet, nil)
	require.NoError(b, err)
	defer e.Close()
	d, err := e.pool.Acquire(ctx)
	require.NoError(b, err)
	defer e.pool.Release(d, true)
	narrow := false
	for b.Loop() {
		narrow = !narrow
		if err := d.channel(channelOf(narrow)); err != nil {
			b.Fatal(err)
		}
	}
}
