//go:build cgo && !nosphinx

package sphinx

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/audio/resample"
)

// A front end of the decoder's own, fed to it as features, hears exactly
// what the decoder's built-in one hears: at a warp of 1 the transcript
// and the N-best scores are the same. So a warped utterance differs from
// an unwarped one by the warp alone.
func TestWarpedFrontEndMatchesDecoders(t *testing.T) {
	skipWithoutModels(t)
	cfg := Config{Decoders: 1, CacheDir: cacheDir}.withDefaults()
	cfg.SpeakerWarp = 1 // withDefaults would turn a warp of 1 off
	d, err := newDecoder(cfg, lmSpec{general: cfg.GeneralLM}, nil)
	require.NoError(t, err)
	defer d.free()
	require.NotNil(t, d.fes[1])
	for _, tc := range []struct{ voice, text string }{
		{"flite-slt", "where is my order"},
		{"flite-kal", "i want to cancel my order"},
	} {
		pcm, rate := synth(t, tc.voice, tc.text)
		if rate != modelRate {
			pcm = resampled(t, pcm, rate)
		}
		decode := func(warp bool) (string, []float64) {
			return decodeOn(t, d, cfg.Search, warp, pcm)
		}
		own, ownScores := decode(false)
		fed, fedScores := decode(true)
		require.Equal(t, own, fed, tc.voice)
		require.Equal(t, ownScores, fedScores, tc.voice)
		// And again, after each other: nothing carries over.
		again, againScores := decode(false)
		require.Equal(t, own, again, tc.voice)
		require.Equal(t, ownScores, againScores, tc.voice)
		requireNear(t, tc.text, own, 2)
	}
}

// sphinxbase keeps a warp's parameters in process globals and skips a
// parameter string equal to the last it parsed, even when an unwarped
// front end has made the globals neutral since: built naively, every
// decoder but the first had a warped front end that did not warp. A
// decoder built after others warps exactly as one whose whole
// configuration has the warp.
func TestWarpSurvivesOtherFrontEnds(t *testing.T) {
	skipWithoutModels(t)
	pcm, _ := synth(t, "flite-slt", "oops i ordered the backpack twice")
	decode := func(cfg Config, warp bool) []float64 {
		cfg = cfg.withDefaults()
		d, err := newDecoder(cfg, lmSpec{general: cfg.GeneralLM}, nil)
		require.NoError(t, err)
		defer d.free()
		_, scores := decodeOn(t, d, cfg.Search, warp, pcm)
		return scores
	}
	unwarped := decode(Config{CacheDir: cacheDir, SpeakerWarp: -1}, false)
	whole := decode(Config{CacheDir: cacheDir, SpeakerWarp: -1, Args: []string{"-warp_params", "1.1"}}, false)
	first := decode(Config{CacheDir: cacheDir, SpeakerWarp: 1.1}, true)
	second := decode(Config{CacheDir: cacheDir, SpeakerWarp: 1.1}, true)
	require.NotEqual(t, unwarped, whole, "the warp changes the scores")
	require.Equal(t, whole, first)
	require.Equal(t, whole, second)
}

// The warp follows the voice: flite's slt (median pitch about 180 Hz) is
// warped, kal (about 100 Hz) and espeak-ng (about 105 Hz) are not, on the
// same decoder one after another; the counters say so.
func TestWarpFollowsPitch(t *testing.T) {
	skipWithoutModels(t)
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	reg := prometheus.NewRegistry()
	e, err := New(ctx, Config{Decoders: 1, CacheDir: cacheDir}, testCorpus(), quiet, reg)
	require.NoError(t, err)
	defer e.Close()
	steps := []struct {
		voice string
		warp  bool
	}{{"flite-slt", true}, {"flite-kal", false}, {"espeak-en-us", false}, {"flite-slt", true}}
	for _, step := range steps {
		text, warped, _ := recogniseWarp(ctx, t, e, step.voice, "where is my order")
		require.Equal(t, step.warp, warped, step.voice)
		requireNear(t, "where is my order", text, 1)
	}
	require.Equal(t, 2.0, testutil.ToFloat64(e.warped))
	require.Equal(t, 2.0, testutil.ToFloat64(e.unwarped))
}

// People's speech, which no setting was chosen on: Asterisk's prompts
// (one woman, about 210 Hz, on the telephone; the warp was chosen on half
// of them and on flite's slt, docs/benchmarks.md "A warp for high
// voices") have fewer word errors with the warp than without.
func TestWarpOnPeoplesSpeech(t *testing.T) {
	prompts := asteriskSample(t, 24)
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	off, words := wordErrorsOn(ctx, t, Config{SpeakerWarp: -1}, prompts)
	on, _ := wordErrorsOn(ctx, t, Config{}, prompts)
	t.Logf("word errors on %d words: no warp %d, warp %g: %d", words, off, DefaultSpeakerWarp, on)
	require.Less(t, on, off)
}

// Without a warp (negative, or KeepCMN), decoders have no warped front
// end and no utterance is warped.
func TestWarpOff(t *testing.T) {
	for _, cfg := range []Config{{SpeakerWarp: -1}, {SpeakerWarp: 1}, {KeepCMN: true}} {
		require.Negative(t, cfg.withDefaults().SpeakerWarp, "%+v", cfg)
	}
	require.Equal(t, DefaultSpeakerWarp, Config{}.withDefaults().SpeakerWarp)
	skipWithoutModels(t)
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	e, err := New(ctx, Config{Decoders: 1, CacheDir: cacheDir, SpeakerWarp: -1}, testCorpus(), quiet, prometheus.NewRegistry())
	require.NoError(t, err)
	defer e.Close()
	_, warped, canWarp := recogniseWarp(ctx, t, e, "flite-slt", "where is my order")
	require.False(t, warped)
	require.False(t, canWarp, "a warped front end")
	require.Zero(t, testutil.ToFloat64(e.warped)+testutil.ToFloat64(e.unwarped))
}

// recogniseWarp recognises text spoken by voice on e and reports whether
// the utterance was warped and whether its decoder could warp.
func recogniseWarp(ctx context.Context, t *testing.T, e *Engine, voice, text string) (got string, warped, canWarp bool) {
	t.Helper()
	pcm, rate := synth(t, voice, text)
	r, err := e.Start(ctx, rate)
	require.NoError(t, err)
	defer r.Close()
	_, err = r.Write(ctx, pcm)
	require.NoError(t, err)
	got, err = r.Finish(ctx)
	require.NoError(t, err)
	d := r.(*recognizer).d
	return got, d.warp, d.fes[1] != nil
}

// decodeOn decodes 16 kHz pcm on d, warped or not, as the engine does
// (the cepstral mean from the first second, then 40 ms blocks), and
// returns the transcript and the scores of the 3 best hypotheses.
func decodeOn(t *testing.T, d *decoder, search string, warp bool, pcm []int16) (string, []float64) {
	t.Helper()
	require.NoError(t, d.start(search, chanWide, warp))
	require.Equal(t, warp, d.warp)
	d.estimateCMN(pcm[:min(len(pcm), modelRate)])
	for i := 0; i < len(pcm); i += block {
		require.NoError(t, d.process(pcm[i:min(i+block, len(pcm))]))
	}
	text, err := d.end()
	require.NoError(t, err)
	alts, _ := d.nbest(3)
	var scores []float64
	for _, a := range alts {
		scores = append(scores, a.Score)
	}
	return text, scores
}

// resampled converts pcm at rate to the model's 16 kHz.
func resampled(t *testing.T, pcm []int16, rate int) []int16 {
	t.Helper()
	rs, err := resample.New(rate, modelRate)
	require.NoError(t, err)
	return rs.Flush(rs.Process(nil, pcm))
}

// PocketSphinx goes on when it cannot parse the model's feat.params,
// with the values read before the error. The warped front end's
// configuration gave up instead (and leaked, sphinxbase leaving it to
// the caller): a model directory whose feat.params ended in one bad value
// failed every decoder ("cannot configure a front end with frequency
// warp"). Now the front end reads the file as the decoder does, and at a
// warp of 1 hears exactly what it hears.
func TestWarpWithUnparsableFeatureParams(t *testing.T) {
	skipWithoutModels(t)
	dir := t.TempDir()
	entries, err := os.ReadDir(DefaultModelDir)
	require.NoError(t, err)
	for _, e := range entries {
		from, to := filepath.Join(DefaultModelDir, e.Name()), filepath.Join(dir, e.Name())
		if e.Name() != "feat.params" {
			require.NoError(t, os.Symlink(from, to))
			continue
		}
		params, err := os.ReadFile(from)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(to, append(params, "\n-nfilt many\n"...), 0o644))
	}
	cfg := Config{Decoders: 1, CacheDir: cacheDir, ModelDir: dir}.withDefaults()
	cfg.SpeakerWarp = 1 // withDefaults would turn a warp of 1 off
	d, err := newDecoder(cfg, lmSpec{general: cfg.GeneralLM}, nil)
	require.NoError(t, err)
	defer d.free()
	const text = "where is my order"
	pcm, rate := synth(t, "flite-slt", text)
	require.Equal(t, modelRate, rate)
	own, ownScores := decodeOn(t, d, cfg.Search, false, pcm)
	fed, fedScores := decodeOn(t, d, cfg.Search, true, pcm)
	require.Equal(t, own, fed)
	require.Equal(t, ownScores, fedScores)
	requireNear(t, text, own, 1)
}
