package sim

import (
	"context"
	"errors"
	"flag"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/voiced/voiced/internal/pipeline"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// stageCall runs one call of a stage, for tests that treat the stages
// alike.
type stageCall struct {
	name string
	call func(ctx context.Context, s *Stages) error
}

var stageCalls = []stageCall{
	{"stt", func(ctx context.Context, s *Stages) error {
		r, err := s.STT.Start(ctx, 16000)
		if err != nil {
			return err
		}
		defer r.Close()
		if _, err := r.Write(ctx, make([]int16, 320)); err != nil {
			return err
		}
		_, err = r.Finish(ctx)
		return err
	}},
	{"intent", func(ctx context.Context, s *Stages) error {
		_, err := s.Intent.Classify(ctx, "hello")
		return err
	}},
	{"retrieval", func(ctx context.Context, s *Stages) error {
		_, err := s.Retrieval.Retrieve(ctx, "hello", 3)
		return err
	}},
	{"llm", func(ctx context.Context, s *Stages) error {
		_, err := s.LLM.Generate(ctx, pipeline.GenerateRequest{Transcript: "hello"}, func(string) {})
		return err
	}},
}

func TestMediansAndTail(t *testing.T) {
	wantMedian := map[string]time.Duration{
		"stt": DefaultSTTMedian, "intent": DefaultIntentMedian,
		"retrieval": DefaultRetrievalMedian, "llm": DefaultLLMMedian,
	}
	for _, sc := range stageCalls {
		t.Run(sc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := New(Config{Seed: 7, FailShare: -1})
				const n = 3000
				lat := make([]time.Duration, 0, n)
				for range n {
					start := time.Now()
					require.NoError(t, sc.call(t.Context(), s))
					lat = append(lat, time.Since(start))
				}
				slices.Sort(lat)
				med, want := lat[n/2], wantMedian[sc.name]
				require.InDelta(t, float64(want), float64(med), 0.08*float64(want), "median %v, want %v", med, want)
				// With sigma 0.5, exp(0.5*2.326) = 3.2: the p99 of the
				// log-normal body alone. The 2% slow calls push the p99 far
				// beyond it, which is the heavy tail asked for.
				p99 := lat[n*99/100]
				require.Greater(t, p99, 5*want, "p99 %v shows no heavy tail", p99)
			})
		})
	}
}

func TestSlowAndFailShares(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// No spread, so a slow call is recognisable by its exact latency.
		s := New(Config{Seed: 3, Sigma: -1, FailShare: 0.1, IntentMedian: 10 * time.Millisecond})
		const n = 5000
		var slow, failed int
		for range n {
			start := time.Now()
			_, err := s.Intent.Classify(t.Context(), "x")
			d := time.Since(start)
			switch {
			case err != nil:
				require.ErrorIs(t, err, pipeline.ErrUnavailable)
				failed++
			case d == 100*time.Millisecond:
				slow++
			default:
				require.Equal(t, 10*time.Millisecond, d)
			}
		}
		require.InDelta(t, 0.02*0.9*n, slow, 0.01*n, "slow calls")
		require.InDelta(t, 0.1*n, failed, 0.02*n, "failed calls")
	})
}

func TestCancelObservedImmediately(t *testing.T) {
	cause := errors.New("client cancelled")
	for _, sc := range stageCalls {
		t.Run(sc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := New(Config{Seed: 1, FailShare: -1, SlowShare: -1, Sigma: -1,
					STTMedian: time.Hour, IntentMedian: time.Hour, RetrievalMedian: time.Hour, LLMMedian: time.Hour})
				ctx, cancel := context.WithCancelCause(t.Context())
				start := time.Now()
				var (
					err  error
					took time.Duration
					done bool
				)
				go func() {
					err = sc.call(ctx, s)
					took, done = time.Since(start), true
				}()
				time.Sleep(25 * time.Millisecond)
				synctest.Wait()
				require.False(t, done, "returned before the cancel")
				cancel(cause)
				synctest.Wait()
				require.True(t, done, "did not return on cancel")
				require.Equal(t, 25*time.Millisecond, took, "cancel not observed at once")
				require.ErrorIs(t, err, cause)
			})
		})
	}
}

func TestAlreadyDoneContext(t *testing.T) {
	cause := errors.New("gone")
	for _, sc := range stageCalls {
		t.Run(sc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := New(Config{Seed: 1})
				ctx, cancel := context.WithCancelCause(t.Context())
				cancel(cause)
				start := time.Now()
				require.ErrorIs(t, sc.call(ctx, s), cause)
				require.Zero(t, time.Since(start))
			})
		})
	}
}

func TestDeadlineRespected(t *testing.T) {
	for _, sc := range stageCalls {
		t.Run(sc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := New(Config{Seed: 1, FailShare: -1, SlowShare: -1, Sigma: -1,
					STTMedian: 10 * time.Second, IntentMedian: 10 * time.Second,
					RetrievalMedian: 10 * time.Second, LLMMedian: 10 * time.Second})
				ctx, cancel := context.WithTimeout(t.Context(), 150*time.Millisecond)
				defer cancel()
				start := time.Now()
				err := sc.call(ctx, s)
				require.ErrorIs(t, err, context.DeadlineExceeded)
				require.Equal(t, 150*time.Millisecond, time.Since(start))
			})
		})
	}
}

func TestGenerateStreamsEvenly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Config{Seed: 1, FailShare: -1, SlowShare: -1, Sigma: -1,
			LLMMedian: 400 * time.Millisecond, LLMPieces: 4, Answer: "one two three four five six seven eight"})
		start := time.Now()
		var pieces []string
		var at []time.Duration
		gen, err := s.LLM.Generate(t.Context(), pipeline.GenerateRequest{}, func(p string) {
			pieces = append(pieces, p)
			at = append(at, time.Since(start))
		})
		require.NoError(t, err)
		require.Equal(t, "sim", gen.Provider)
		require.Equal(t, "one two three four five six seven eight", strings.Join(pieces, ""))
		require.Equal(t, []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 300 * time.Millisecond, 400 * time.Millisecond}, at)
	})
}

func TestGenerateFailureCutsStream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Config{Seed: 5, FailShare: 1, SlowShare: -1, Sigma: -1, LLMMedian: 400 * time.Millisecond})
		for range 50 {
			start := time.Now()
			var n int
			_, err := s.LLM.Generate(t.Context(), pipeline.GenerateRequest{}, func(string) { n++ })
			require.ErrorIs(t, err, pipeline.ErrUnavailable)
			require.Less(t, n, DefaultLLMPieces)
			require.LessOrEqual(t, time.Since(start), 400*time.Millisecond)
		}
	})
}

func TestFlagsAndScriptedTranscripts(t *testing.T) {
	var cfg Config
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	cfg.RegisterFlags(fs)
	require.NoError(t, fs.Parse([]string{"-sim-stt-median=120ms", "-sim-sigma=-1", "-sim-slow-share=-1",
		"-sim-fail-share=-1", "-sim-transcript", "first", "-sim-transcript", "second"}))
	require.Equal(t, 120*time.Millisecond, cfg.STTMedian)
	require.Equal(t, DefaultLLMMedian, cfg.LLMMedian)
	synctest.Test(t, func(t *testing.T) {
		s := New(cfg)
		var got []string
		for range 3 {
			r, err := s.STT.Start(t.Context(), 16000)
			require.NoError(t, err)
			start := time.Now()
			text, err := r.Finish(t.Context())
			require.NoError(t, err)
			require.Equal(t, 120*time.Millisecond, time.Since(start))
			require.NoError(t, r.Close())
			got = append(got, text)
		}
		require.Equal(t, []string{"first", "second", "first"}, got)
	})
}

func TestPartialsGrowWithAudio(t *testing.T) {
	s := New(Config{Seed: 1, Transcripts: []string{"a b c"}})
	r, err := s.STT.Start(t.Context(), 16000)
	require.NoError(t, err)
	defer r.Close()
	var partials []string
	for range 4 {
		p, err := r.Write(t.Context(), make([]int16, 8000)) // half a second
		require.NoError(t, err)
		partials = append(partials, p)
	}
	require.Equal(t, []string{"a", "a b", "a b c", "a b c"}, partials)
}

func TestBadSampleRate(t *testing.T) {
	s := New(Config{})
	_, err := s.STT.Start(t.Context(), 0)
	require.ErrorIs(t, err, pipeline.ErrBadAudio)
	require.ErrorIs(t, err, ErrSampleRate)
}

func TestSeedReproducible(t *testing.T) {
	sample := func() []call {
		s := New(Config{Seed: 42})
		var cs []call
		for range 20 {
			cs = append(cs, s.STT.src.sample(s.STT.median))
		}
		return cs
	}
	require.Equal(t, sample(), sample())
}
