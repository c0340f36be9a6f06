//go:build cgo && !nosphinx

package sphinx

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/pipeline"
	"github.com/voiced/voiced/internal/stages/stt/lm"
	"github.com/voiced/voiced/internal/stages/stt/sttest"
)

// secondOf is the recognizer's second model decoder, nil without one.
func secondOf(r pipeline.Recognizer) *decoder {
	rec := r.(*recognizer)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return rec.second
}

// secondEngine is an engine whose utterances get a second model while at
// most one is in progress, waiting for its final pass as long as it
// takes.
func secondEngine(t *testing.T, cfg Config) *Engine {
	t.Helper()
	skipWithoutModels(t)
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	if cfg.Decoders == 0 {
		cfg.Decoders = 4
	}
	if cfg.BusyAbove == 0 {
		cfg.BusyAbove = 1
	}
	// Decoders closed mid-utterance come back once the pool has ended
	// their utterances (a final pass each): Start waits for them.
	cfg.MaxWait = testTimeout
	cfg.CacheDir = cacheDir
	e, err := New(ctx, cfg, testCorpus(), quiet, prometheus.NewRegistry())
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, e.Close(), "every decoder came back") })
	return e
}

// secondSentences are callers' sentences that no domain text, evaluation
// set or adaptation used.
var secondSentences = []string{
	"hello i bought a lamp last week and it has not come yet",
	"can you tell me when my parcel will get here",
	"i would like to send back the shoes i ordered",
	"my card was charged twice for the same order",
	"do you have any stores open on sunday",
	"how long does it take to get a refund",
	"the box arrived wet and the cups inside were broken",
	"is there a phone number i can call about my account",
	"please change the address on my last order",
	"thank you that is all i needed today",
}

// On real audio the second model runs, and each transcript is one of the
// two models' own: the first's (as an engine without a second model
// hears it) or the second's (as an engine whose second model always wins
// hears it), the second's when it is surer by the margin, which happens
// for some of espeak-ng's sentences. Heard by the second model alone,
// espeak-ng's voice, which the general model hears badly, makes fewer
// word errors. (Whether the choice helps is the evaluation's to say, on
// hundreds of sentences: docs/benchmarks.md, "A second model for wideband
// audio".)
func TestSecondModel(t *testing.T) {
	e := secondEngine(t, Config{SecondWait: time.Minute})
	once := secondEngine(t, Config{SecondModel: SecondNone})
	always := secondEngine(t, Config{SecondWait: time.Minute, SecondMargin: -1e9})
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	var firstErrs, secondErrs int
	for _, text := range secondSentences {
		pcm, rate := synth(t, "espeak-en-us", text)
		got, _, err := stream(ctx, e, pcm, rate)
		require.NoError(t, err)
		first, _, err := stream(ctx, once, pcm, rate)
		require.NoError(t, err)
		second, _, err := stream(ctx, always, pcm, rate)
		require.NoError(t, err)
		t.Logf("%q: first %q, second %q, kept %q", text, first, second, got)
		require.Contains(t, []string{first, second}, got)
		n, _ := sttest.WordErrors(lm.Normalize(text), first)
		firstErrs += n
		n, _ = sttest.WordErrors(lm.Normalize(text), second)
		secondErrs += n
	}
	require.Less(t, secondErrs, firstErrs, "word errors of the second model alone against the first's")
	require.Positive(t, testutil.ToFloat64(e.secondChosen), "the second model's transcript never kept")
	require.Positive(t, testutil.ToFloat64(e.secondKept), "the first model's transcript never kept")
	require.InDelta(t, len(secondSentences), testutil.ToFloat64(always.secondChosen), 0)
	for _, c := range []prometheus.Counter{e.secondLate, e.secondFailed, e.secondNone} {
		require.Zero(t, testutil.ToFloat64(c))
	}
}

// The second model costs CPU and a decoder only when they are idle: an
// utterance that starts while the engine is busy, audio that arrives at
// 8 kHz or turns out to be upsampled from it, or an engine without a
// decoder free beyond the busy bound's, decode once. Every decoder comes
// back, also from an utterance closed in the middle.
func TestSecondModelOnlyWhenIdle(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	pcm, rate := synth(t, "espeak-en-us", secondSentences[0])
	kal, kalRate := synth(t, "flite-kal", secondSentences[0])
	require.Equal(t, narrowbandRate, kalRate)

	e := secondEngine(t, Config{Decoders: 5})
	first, err := e.Start(ctx, rate)
	require.NoError(t, err)
	busy, err := e.Start(ctx, rate)
	require.NoError(t, err)
	at8k, err := e.Start(ctx, kalRate)
	require.NoError(t, err)
	for _, r := range []pipeline.Recognizer{first, busy} {
		_, err = r.Write(ctx, pcm)
		require.NoError(t, err)
	}
	_, err = at8k.Write(ctx, kal)
	require.NoError(t, err)
	require.NotNil(t, secondOf(first), "the first utterance started while the engine was idle")
	require.Nil(t, secondOf(busy), "started while another was in progress (BusyAbove 1)")
	require.Nil(t, secondOf(at8k), "narrowband audio")
	// Closed mid-utterance, with its second: both decoders come back.
	for _, r := range []pipeline.Recognizer{first, busy, at8k} {
		require.NoError(t, r.Close())
	}
	var all []pipeline.Recognizer
	for range e.Decoders() {
		r, err := e.Start(ctx, kalRate) // narrowband: no second model
		require.NoError(t, err, "a decoder did not come back")
		all = append(all, r)
	}
	for _, r := range all {
		require.NoError(t, r.Close())
	}

	up, err := e.Start(ctx, modelRate)
	require.NoError(t, err)
	_, err = up.Write(ctx, upsample(t, kal, kalRate))
	require.NoError(t, err)
	require.Nil(t, secondOf(up), "8 kHz audio upsampled is found narrowband in the window")
	require.NoError(t, up.Close())

	// Three decoders, one for the utterance and two kept free (the busy
	// bound, 2): none for a second model.
	tight := secondEngine(t, Config{Decoders: 3, BusyAbove: 2})
	r, err := tight.Start(ctx, rate)
	require.NoError(t, err)
	_, err = r.Write(ctx, pcm)
	require.NoError(t, err)
	require.Nil(t, secondOf(r))
	_, err = r.Finish(ctx)
	require.NoError(t, err)
	require.NoError(t, r.Close())
	require.InDelta(t, 1, testutil.ToFloat64(tight.secondNone), 0)
}

// A second model late for its final pass does not hold the transcript:
// the first model's is returned once the wait is over, and the second's
// decoder comes back when its pass ends (secondEngine's Close checks).
func TestSecondModelLate(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	pcm, rate := synth(t, "espeak-en-us", secondSentences[0])
	once := secondEngine(t, Config{SecondModel: SecondNone})
	want, _, err := stream(ctx, once, pcm, rate)
	require.NoError(t, err)

	e := secondEngine(t, Config{SecondWait: time.Nanosecond})
	// Hold one of the gate's CPUs while the first's final pass runs on
	// the other, so the second's waits for it.
	r, err := e.Start(ctx, rate)
	require.NoError(t, err)
	_, err = r.Write(ctx, pcm)
	require.NoError(t, err)
	require.NotNil(t, secondOf(r))
	for range e.cfg.Parallel - 1 {
		require.NoError(t, e.gate.acquire(ctx, true))
	}
	got, err := r.Finish(ctx)
	for range e.cfg.Parallel - 1 {
		e.gate.release()
	}
	require.NoError(t, err)
	require.Equal(t, want, got, "the first model's transcript")
	require.InDelta(t, 1, testutil.ToFloat64(e.secondLate), 0)
	require.NoError(t, r.Close())
}
