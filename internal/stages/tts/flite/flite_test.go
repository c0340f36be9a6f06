//go:build cgo && !noflite

package flite

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/voiced/voiced/internal/stages/tts/speech"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const testTimeout = 30 * time.Second

func newEngine(t *testing.T, cfg Config) *Engine {
	t.Helper()
	e, err := New(cfg)
	require.NoError(t, err)
	return e
}

type collected struct {
	mu     sync.Mutex
	chunks [][]int16
}

func (c *collected) emit(p []int16) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.chunks = append(c.chunks, p)
}

func (c *collected) samples() int {
	n := 0
	for _, p := range c.chunks {
		n += len(p)
	}
	return n
}

const sentence = "Your order shipped yesterday and should arrive on Friday."

func TestVoices(t *testing.T) {
	e := newEngine(t, Config{})
	require.Equal(t, []string{"slt", "kal", "awb", "rms"}, e.Voices())
	require.Equal(t, "flite", e.Name())
	for _, v := range e.Voices() {
		t.Run(v, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
			defer cancel()
			var c collected
			res, err := e.Synthesize(ctx, speech.Request{Text: sentence, Voice: v, SampleRate: 16000}, c.emit)
			require.NoError(t, err)
			require.Equal(t, v, res.Voice)
			require.Equal(t, "flite", res.Engine)
			require.Equal(t, c.samples(), res.Samples)
			require.Equal(t, len(c.chunks), res.Chunks)
			// About three seconds of speech for this sentence.
			require.InDelta(t, 3.3, res.Audio().Seconds(), 1.2)
			for i, p := range c.chunks {
				require.LessOrEqual(t, len(p), 3200, "chunk %d over 200 ms", i)
			}
			require.Len(t, res.Words, 9)
			require.Equal(t, "your", res.Words[0].Text)
			require.Equal(t, "friday", res.Words[8].Text)
			var prev time.Duration
			for _, w := range res.Words {
				require.GreaterOrEqual(t, w.Start, prev)
				require.Greater(t, w.End, w.Start, w.Text)
				require.Equal(t, strings.ToLower(sentence[w.From:w.To]), w.Text)
				prev = w.End
			}
			require.LessOrEqual(t, res.Words[8].End, res.Audio()+10*time.Millisecond)
			require.Greater(t, res.Words[0].Start, 50*time.Millisecond, "leading pause")
			require.Equal(t, "Your order shipped", sentence[:res.Heard(res.Words[2].End)])
			require.Positive(t, res.FirstChunk)
			require.LessOrEqual(t, res.FirstChunk, res.Elapsed)
			require.Equal(t, len(sentence), res.Chars)
		})
	}
}

// The same sentence at every output rate lasts as long; only the sample
// count changes. (CG voices are not sample-deterministic, so lengths are
// compared with kal, which is.)
func TestRates(t *testing.T) {
	e := newEngine(t, Config{})
	var base time.Duration
	for _, rate := range speech.SampleRates {
		ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
		var c collected
		res, err := e.Synthesize(ctx, speech.Request{Text: sentence, Voice: "kal", SampleRate: rate}, c.emit)
		cancel()
		require.NoError(t, err)
		require.Equal(t, rate, res.SampleRate)
		for i, p := range c.chunks {
			require.LessOrEqual(t, len(p), rate/5, "rate %d chunk %d over 200 ms", rate, i)
		}
		if base == 0 {
			base = res.Audio()
		}
		require.InDelta(t, base.Seconds(), res.Audio().Seconds(), 0.002, "rate %d", rate)
	}
}

func TestBadRequests(t *testing.T) {
	e := newEngine(t, Config{})
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	for _, tt := range []struct {
		name string
		req  speech.Request
		want error
	}{
		{"unknown voice", speech.Request{Text: "hi", Voice: "hal", SampleRate: 16000}, speech.ErrVoice},
		{"bad rate", speech.Request{Text: "hi", SampleRate: 11025}, speech.ErrRate},
		{"no rate", speech.Request{Text: "hi"}, speech.ErrRate},
		{"empty", speech.Request{Text: "", SampleRate: 16000}, speech.ErrEmpty},
		{"blank", speech.Request{Text: " \n\t ", SampleRate: 16000}, speech.ErrEmpty},
		{"only emoji and punctuation", speech.Request{Text: "😀 … !", SampleRate: 16000}, speech.ErrEmpty},
	} {
		t.Run(tt.name, func(t *testing.T) {
			n := 0
			_, err := e.Synthesize(ctx, tt.req, func([]int16) { n++ })
			require.ErrorIs(t, err, tt.want)
			require.Zero(t, n, "no audio for a bad request")
		})
	}
}

// Non-ASCII text is spoken without junk words.
func TestNonASCII(t *testing.T) {
	e := newEngine(t, Config{})
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	text := "The café’s crème brûlée costs €5 😀."
	res, err := e.Synthesize(ctx, speech.Request{Text: text, SampleRate: 16000}, func([]int16) {})
	require.NoError(t, err)
	var got []string
	for _, w := range res.Words {
		got = append(got, w.Text)
	}
	require.Equal(t, []string{"the", "cafe", "'s", "creme", "brulee", "costs", "euro", "five"}, got)
}

// Text that crashed Flite or held it for minutes (an LLM's degenerate
// answer) is spoken, or stops with its context: a run of punctuation
// after a word corrupted Flite's heap (abort), a long word took time
// quadratic in its length, and Flite analyses a whole text before it
// looks at the context.
func TestDegenerateText(t *testing.T) {
	e := newEngine(t, Config{})
	for _, text := range []string{
		"a" + strings.Repeat(".", 400),
		"Sure" + strings.Repeat("!", 400),
		"yes" + strings.Repeat(")", 500),
		"a " + strings.Repeat("w", 16000),
	} {
		ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
		_, err := e.Synthesize(ctx, speech.Request{Text: text, SampleRate: 16000}, func([]int16) {})
		cancel()
		require.NoError(t, err, "%.20q", text)
	}
	// 2,000 letters to spell: Flite took 6 s before its first look at a
	// 200 ms context; in pieces, it stops within one piece's analysis.
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := e.Synthesize(ctx, speech.Request{Text: strings.Repeat("w ", 2000), SampleRate: 16000}, func([]int16) {})
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Less(t, time.Since(start), 3*time.Second)
}

// Cancelling stops Flite at its next audio callback: nothing is emitted
// after the cancel, and the call returns the cause at once.
func TestCancelStops(t *testing.T) {
	e := newEngine(t, Config{})
	ctx, cancel := context.WithCancelCause(t.Context())
	defer cancel(nil)
	stop := errors.New("barge-in")
	long := sentence + " " + sentence + " " + sentence
	var c collected
	res, err := e.Synthesize(ctx, speech.Request{Text: long, SampleRate: 16000}, func(p []int16) {
		c.emit(p)
		if len(c.chunks) == 2 {
			cancel(stop)
		}
	})
	require.ErrorIs(t, err, stop)
	require.Len(t, c.chunks, 2, "no audio after the cancel")
	require.Equal(t, c.samples(), res.Samples)
	require.NotEmpty(t, res.Words, "word timings survive a stop")

	// Already cancelled: no audio at all.
	n := 0
	_, err = e.Synthesize(ctx, speech.Request{Text: sentence, SampleRate: 16000}, func([]int16) { n++ })
	require.ErrorIs(t, err, stop)
	require.Zero(t, n)
}

// With one slot, a second synthesis waits for it, and gives up when its
// context ends first.
func TestParallelBound(t *testing.T) {
	e := newEngine(t, Config{Parallel: 1})
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	holding, release := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		once := sync.OnceFunc(func() { close(holding); <-release })
		_, err := e.Synthesize(ctx, speech.Request{Text: sentence, SampleRate: 16000}, func([]int16) { once() })
		require.NoError(t, err)
	})
	<-holding
	short, cancelShort := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancelShort()
	_, err := e.Synthesize(short, speech.Request{Text: "hello", SampleRate: 16000}, func([]int16) {})
	require.ErrorIs(t, err, context.DeadlineExceeded)
	close(release)
	wg.Wait()
	_, err = e.Synthesize(ctx, speech.Request{Text: "hello", SampleRate: 16000}, func([]int16) {})
	require.NoError(t, err, "the slot is free again")
}

// Many syntheses at once on shared voices give complete audio.
func TestConcurrent(t *testing.T) {
	e := newEngine(t, Config{Parallel: 4})
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	var wg sync.WaitGroup
	lens := make([]int, 8)
	for i := range lens {
		wg.Go(func() {
			voice := []string{"slt", "kal"}[i%2]
			res, err := e.Synthesize(ctx, speech.Request{Text: sentence, Voice: voice, SampleRate: 24000}, func([]int16) {})
			require.NoError(t, err)
			lens[i] = res.Samples
		})
	}
	wg.Wait()
	for i := 2; i < len(lens); i++ {
		require.Equal(t, lens[i%2], lens[i], "same voice, same text, same length")
	}
}

// A panic in emit comes out of Synthesize after Flite has returned, and
// the engine stays usable (its slot is released).
func TestEmitPanic(t *testing.T) {
	e := newEngine(t, Config{Parallel: 1})
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	require.PanicsWithValue(t, "sink broke", func() {
		_, _ = e.Synthesize(ctx, speech.Request{Text: sentence, SampleRate: 16000}, func([]int16) { panic("sink broke") })
	})
	_, err := e.Synthesize(ctx, speech.Request{Text: sentence, SampleRate: 16000}, func([]int16) {})
	require.NoError(t, err)
}
