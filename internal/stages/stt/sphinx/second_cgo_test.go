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
// utterance that starts while the engine is busy, or reaches its window
// while the gate's CPUs are taken by utterances and second models, audio
// that arrives at 8 kHz or turns out to be upsampled from it, or an engine
// without a decoder free beyond the busy bound's, decode once. Every
// decoder comes back, also from an utterance closed in the middle.
func TestSecondModelOnlyWhenIdle(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	pcm, rate := synth(t, "espeak-en-us", secondSentences[0])
	kal, kalRate := synth(t, "flite-kal", secondSentences[0])
	require.Equal(t, narrowbandRate, kalRate)
	start := func(e *Engine, pcm []int16, rate int) pipeline.Recognizer {
		t.Helper()
		r, err := e.Start(ctx, rate)
		require.NoError(t, err)
		_, err = r.Write(ctx, pcm) // past the window
		require.NoError(t, err)
		return r
	}

	e := secondEngine(t, Config{Decoders: 6, Parallel: 2})
	first := start(e, pcm, rate)
	require.NotNil(t, secondOf(first), "the first utterance started while the engine was idle")
	busy := start(e, pcm, rate)
	require.Nil(t, secondOf(busy), "started while another was in progress (BusyAbove 1)")
	at8k := start(e, kal, kalRate)
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
	up := start(e, upsample(t, kal, kalRate), modelRate)
	require.Nil(t, secondOf(up), "8 kHz audio upsampled is found narrowband in the window")
	require.NoError(t, up.Close())

	// Two CPUs, two utterances not busy (BusyAbove 2): the first takes
	// the second CPU for its second model, the other finds none left;
	// two in progress from the start leave none either.
	two := secondEngine(t, Config{Decoders: 8, Parallel: 2, BusyAbove: 2})
	a := start(two, pcm, rate)
	require.NotNil(t, secondOf(a))
	b := start(two, pcm, rate)
	require.Nil(t, secondOf(b), "the gate's two CPUs are the two decoders of the first utterance")
	require.InDelta(t, 1, testutil.ToFloat64(two.secondNone), 0)
	require.NoError(t, a.Close())
	require.NoError(t, b.Close())
	c, err := two.Start(ctx, rate)
	require.NoError(t, err)
	d, err := two.Start(ctx, rate)
	require.NoError(t, err)
	for _, r := range []pipeline.Recognizer{c, d} {
		_, err = r.Write(ctx, pcm)
		require.NoError(t, err)
	}
	for _, r := range []pipeline.Recognizer{c, d} {
		require.Nil(t, secondOf(r), "two utterances in progress on two CPUs")
		require.NoError(t, r.Close())
	}
	// With all gone, the next utterance has its own.
	c = start(two, pcm, rate)
	require.NotNil(t, secondOf(c))
	require.NoError(t, c.Close())

	// One CPU: never a second model.
	one := secondEngine(t, Config{Parallel: 1})
	r := start(one, pcm, rate)
	require.Nil(t, secondOf(r))
	require.NoError(t, r.Close())

	// Three decoders, one for the utterance and two kept free (the busy
	// bound, 2): none for a second model.
	tight := secondEngine(t, Config{Decoders: 3, BusyAbove: 2})
	r = start(tight, pcm, rate)
	require.Nil(t, secondOf(r))
	_, err = r.Finish(ctx)
	require.NoError(t, err)
	require.NoError(t, r.Close())
	require.InDelta(t, 1, testutil.ToFloat64(tight.secondNone), 0)
	require.Zero(t, tight.seconds.Load())
	require.Zero(t, two.seconds.Load(), "every second model counted out")
}

// oneModel is sentence spoken by espeak-ng, its rate, and its transcript
// by an engine without a second model.
func oneModel(ctx context.Context, t *testing.T, sentence string) ([]int16, int, string) {
	t.Helper()
	pcm, rate := synth(t, "espeak-en-us", sentence)
	want, _, err := stream(ctx, secondEngine(t, Config{SecondModel: SecondNone}), pcm, rate)
	require.NoError(t, err)
	return pcm, rate, want
}

// A second model late for its final pass does not hold the transcript:
// the first model's is returned once the wait is over, and the second's
// decoder comes back when its pass ends (secondEngine's Close checks).
func TestSecondModelLate(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	pcm, rate, want := oneModel(ctx, t, secondSentences[0])

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

// A second model gives its CPU back to utterances that start after it:
// one newcomer preempts one second model, at the next block it would
// decode, and the transcript is then the first model's.
func TestSecondModelPreempted(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	pcm, rate, want := oneModel(ctx, t, secondSentences[1])
	half := len(pcm) / 2
	start := func(e *Engine) pipeline.Recognizer {
		t.Helper()
		r, err := e.Start(ctx, rate)
		require.NoError(t, err)
		_, err = r.Write(ctx, pcm[:half]) // past the window
		require.NoError(t, err)
		return r
	}
	more := func(r pipeline.Recognizer) {
		t.Helper()
		_, err := r.Write(ctx, pcm[half:half+rate/10])
		require.NoError(t, err)
	}

	// Two CPUs: the second utterance takes the first's second model's.
	e := secondEngine(t, Config{Decoders: 6, Parallel: 2, BusyAbove: 2, SecondWait: time.Minute})
	a := start(e)
	require.NotNil(t, secondOf(a))
	b, err := e.Start(ctx, rate)
	require.NoError(t, err)
	require.NotNil(t, secondOf(a), "preempted at its next block, not by Start")
	more(a)
	require.Nil(t, secondOf(a), "preempted by the utterance that started since")
	require.InDelta(t, 1, testutil.ToFloat64(e.secondPreempted), 0)
	require.Zero(t, e.seconds.Load())
	_, err = a.Write(ctx, pcm[half+rate/10:])
	require.NoError(t, err)
	got, err := a.Finish(ctx)
	require.NoError(t, err)
	require.Equal(t, want, got, "the first model's transcript")
	for _, r := range []pipeline.Recognizer{a, b} {
		require.NoError(t, r.Close())
	}
	for _, c := range []prometheus.Counter{e.secondChosen, e.secondKept, e.secondLate} {
		require.Zero(t, testutil.ToFloat64(c), "no final pass on the second model")
	}

	// Four CPUs, two utterances with a second model each: a third
	// preempts one of them, and the other keeps its own.
	four := secondEngine(t, Config{Decoders: 8, Parallel: 4, BusyAbove: 4})
	a, b = start(four), start(four)
	require.NotNil(t, secondOf(a))
	require.NotNil(t, secondOf(b))
	c, err := four.Start(ctx, rate)
	require.NoError(t, err)
	more(a)
	more(b)
	require.Nil(t, secondOf(a))
	require.NotNil(t, secondOf(b), "one newcomer, one second model given up")
	require.InDelta(t, 1, testutil.ToFloat64(four.secondPreempted), 0)
	require.EqualValues(t, 1, four.seconds.Load())
	for _, r := range []pipeline.Recognizer{a, b, c} {
		require.NoError(t, r.Close())
	}
	require.Zero(t, four.seconds.Load(), "every second model counted out")
}
