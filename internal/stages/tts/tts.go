// Package tts selects and builds voiced's speech synthesis engine: the
// embedded Flite engine (package flite, the default: offline, no key),
// or a remote OpenAI-compatible endpoint (package remote) that falls back
// to Flite sentence by sentence when it fails.
//
// The pipeline speaks an answer one sentence at a time (package sentence
// splits the streamed answer): Engine.Synthesize streams each sentence's
// audio in chunks of at most 200 ms at the client's sample rate, stops at
// once when its context ends, and reports word timings, so the session
// can cut the history to what the user heard. Engine.Estimate predicts
// how long synthesising a number of characters takes, from speeds learned
// online per engine and voice, so the LLM's answer can be sized to fit.
package tts

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/voiced/voiced/internal/stages/llm/provider"
	"github.com/voiced/voiced/internal/stages/tts/flite"
	"github.com/voiced/voiced/internal/stages/tts/remote"
	"github.com/voiced/voiced/internal/stages/tts/speech"
)

// The shared types, so the pipeline needs only this package.
type (
	// Request is one sentence to speak.
	Request = speech.Request
	// Result is the record of one synthesis, with word timings.
	Result = speech.Result
	// Word is one word's timing.
	Word = speech.Word
)

// Errors, checked with errors.Is.
var (
	ErrUnavailable = speech.ErrUnavailable
	ErrVoice       = speech.ErrVoice
	ErrRate        = speech.ErrRate
	ErrEmpty       = speech.ErrEmpty
)

// MaxChunk is the most audio in one chunk.
const MaxChunk = speech.MaxChunk

// SampleRates are the output rates every engine offers.
func SampleRates() []int { return slices.Clone(speech.SampleRates) }

// Synthesizer speaks text. Implementations are safe for concurrent use.
type Synthesizer interface {
	// Name is the engine's name ("flite", "remote").
	Name() string
	// Voices are the engine's voices, the default first.
	Voices() []string
	// Synthesize speaks req and calls emit with each chunk of audio (at
	// most MaxChunk, at req.SampleRate), in order, from the calling
	// goroutine; emit owns the slice and must not block. It returns when
	// the audio is complete, or soon after ctx ends (with ctx's cause).
	// The Result describes the audio emitted even when it fails.
	Synthesize(ctx context.Context, req Request, emit func(pcm []int16)) (Result, error)
}

var (
	_ Synthesizer = (*flite.Engine)(nil)
	_ Synthesizer = (*remote.Engine)(nil)
	_ Synthesizer = (*fallback)(nil)
	_ Synthesizer = (*Engine)(nil)
)

// Engine names.
const (
	EngineFlite  = flite.Name
	EngineRemote = remote.Name
)

// Engines lists the engine names.
func Engines() []string { return slices.Sorted(maps.Keys(initialCPS)) }

// initialCPS are the speeds (characters per second of synthesis time)
// assumed before any is learned, on the slow side: Flite's slt measured
// ~600 on an idle 2-core VM and ~200 on a loaded one; remote servers
// answer a sentence in a few hundred milliseconds.
var initialCPS = map[string]float64{EngineFlite: 200, EngineRemote: 60}

// Config selects and configures the engine. The zero value means Flite
// with its defaults.
type Config struct {
	// Engine is EngineFlite (default) or EngineRemote (which falls back
	// to Flite when Flite is in the build).
	Engine string
	// Voice is the default voice: the first of Voices, used when a
	// request names none; "" means the engine's own default (slt).
	Voice string
	// Alpha is the weight of each new sample in the learned speeds;
	// 0 means 0.2.
	Alpha  float64
	Flite  flite.Config
	Remote remote.Config
	// Cooldown is how long the remote engine is skipped after a failure
	// that made a sentence fall back; 0 means 10s, negative never skips.
	Cooldown time.Duration
}

// RegisterFlags registers the -tts.* flags on fs, writing into c.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.Engine, "tts.engine", EngineFlite, "speech synthesis engine: "+strings.Join(Engines(), " or ")+" (remote falls back to flite), or off for no speech")
	fs.StringVar(&c.Voice, "tts.voice", "", "default voice (default: the engine's first: slt for flite, the first of -tts.remote.voices for remote)")
	fs.IntVar(&c.Flite.Parallel, "tts.parallel", 0, "embedded engine: most syntheses at once, each holding a thread (0: one per CPU)")
	r := &c.Remote
	fs.StringVar(&r.BaseURL, "tts.remote.url", "", "remote engine: OpenAI-compatible API base URL including /v1")
	fs.StringVar(&r.Model, "tts.remote.model", "tts-1", "remote engine: model name")
	fs.Func("tts.remote.voices", "remote engine: comma-separated voices offered, the default first (default alloy)", func(v string) error {
		r.Voices = nil
		for f := range strings.SplitSeq(v, ",") {
			if f = strings.TrimSpace(f); f != "" {
				r.Voices = append(r.Voices, f)
			}
		}
		return nil
	})
	fs.StringVar(&r.APIKeyEnv, "tts.remote.key-env", "VOICED_TTS_API_KEY", "remote engine: environment variable holding the API key")
	fs.IntVar(&r.SampleRate, "tts.remote.rate", 24000, "remote engine: sample rate of the server's pcm audio (24000 for OpenAI and Kokoro; 0: the default)")
	fs.DurationVar(&r.FirstByte, "tts.remote.first-byte", time.Second, "remote engine: longest wait for the first audio byte (and between reads) before falling back (0: the default)")
	fs.DurationVar(&c.Cooldown, "tts.remote.cooldown", 10*time.Second, "remote engine: how long it is skipped after a failure (0: the default; negative (say -1s): never)")
}

// Validate checks the default voice against the engine's voices, naming
// the flag: New refuses it too, but without saying which flag, and
// voiced builds its engines only once it has opened its listener. An
// unknown engine is left to New (voiced checks it itself, with its "off").
func (c Config) Validate() error {
	var voices []string
	switch c.Engine {
	case "", EngineFlite:
		voices = flite.Voices()
	case EngineRemote:
		voices = c.Remote.OfferedVoices()
	}
	if c.Voice != "" && voices != nil && !slices.Contains(voices, c.Voice) {
		return fmt.Errorf("-tts.voice: %w %q (want one of %s)", ErrVoice, c.Voice, strings.Join(voices, ", "))
	}
	return nil
}

// Engine is the selected synthesiser with its metrics and learned speeds.
// It satisfies Synthesizer.
type Engine struct {
	syn    Synthesizer
	name   string
	voices []string
	alpha  float64
	m      *metrics

	mu     sync.Mutex
	speeds map[string]*speed // engine/voice
}

// New builds the configured engine. Without cgo, Flite is unavailable:
// New returns an error wrapping ErrUnavailable for EngineFlite (speech is
// then off), and the remote engine runs without a fallback (logged on log,
// which may be nil).
func New(cfg Config, log *slog.Logger, reg prometheus.Registerer) (*Engine, error) {
	name := cfg.Engine
	if name == "" {
		name = EngineFlite
	}
	m, err := newMetrics(reg)
	if err != nil {
		return nil, fmt.Errorf("tts: register metrics: %w", err)
	}
	e := &Engine{name: name, alpha: cfg.Alpha, m: m, speeds: map[string]*speed{}}
	if e.alpha <= 0 {
		e.alpha = 0.2
	}
	switch name {
	case EngineFlite:
		f, err := flite.New(cfg.Flite)
		if err != nil {
			return nil, fmt.Errorf("tts: %w", err)
		}
		e.syn = f
	case EngineRemote:
		r, err := remote.New(cfg.Remote, nil)
		if err != nil {
			return nil, fmt.Errorf("tts: %w", err)
		}
		e.syn = r
		f, err := flite.New(cfg.Flite)
		if err != nil {
			if log != nil {
				log.Warn("remote speech engine without a fallback", "err", err)
			}
		} else {
			e.syn = newFallback(r, f, cfg.Cooldown, e.observe, e.estimate, m)
		}
	default:
		return nil, fmt.Errorf("tts: unknown engine %q (want %s)", name, strings.Join(Engines(), " or "))
	}
	e.voices = e.syn.Voices()
	if cfg.Voice != "" {
		i := slices.Index(e.voices, cfg.Voice)
		if i < 0 {
			return nil, fmt.Errorf("tts: default voice: %w %q (want one of %s)", ErrVoice, cfg.Voice, strings.Join(e.voices, ", "))
		}
		e.voices = append([]string{cfg.Voice}, slices.Delete(e.voices, i, i+1)...)
	}
	return e, nil
}

// Name is the configured engine's name ("flite" or "remote").
func (e *Engine) Name() string { return e.name }

// Voices are the voices a client may ask for, the default first.
func (e *Engine) Voices() []string { return slices.Clone(e.voices) }

// SampleRates are the output rates a client may ask for.
func (e *Engine) SampleRates() []int { return SampleRates() }

// Warm opens the remote engine's connection ahead of the first request;
// a no-op for Flite.
func (e *Engine) Warm(ctx context.Context) error {
	if w, ok := e.syn.(interface{ Warm(context.Context) error }); ok {
		return w.Warm(ctx)
	}
	return nil
}

// Synthesize speaks req (see Synthesizer), with the default voice when
// req names none, and records metrics and the learned speed.
func (e *Engine) Synthesize(ctx context.Context, req Request, emit func(pcm []int16)) (Result, error) {
	if req.Voice == "" {
		req.Voice = e.voices[0]
	}
	res, err := e.syn.Synthesize(ctx, req, emit)
	e.observe(ctx, res, err)
	return res, err
}

// observe records one synthesis's outcome.
func (e *Engine) observe(ctx context.Context, res Result, err error) {
	if res.Engine == "" {
		return
	}
	if res.Chunks > 0 {
		e.m.chunks.WithLabelValues(res.Engine).Add(float64(res.Chunks))
		e.m.audio.WithLabelValues(res.Engine).Add(res.Audio().Seconds())
		e.m.firstChunk.WithLabelValues(res.Engine).Observe(res.FirstChunk.Seconds())
	}
	if err != nil {
		e.m.failures.WithLabelValues(res.Engine, kindOf(ctx, err)).Inc()
		if ctx.Err() != nil && !res.Complete {
			// Cut by our own deadline or cancellation before its end:
			// the engine could not say res.Chars in res.Elapsed.
			e.speed(res.Engine, res.Voice).atMost(res.Chars, res.Elapsed)
		}
		return
	}
	e.m.rtf.WithLabelValues(res.Engine, res.Voice).Observe(res.RTF())
	e.speed(res.Engine, res.Voice).observe(res.Chars, res.Elapsed)
}

func (e *Engine) speed(engine, voice string) *speed {
	e.mu.Lock()
	defer e.mu.Unlock()
	k := engine + "/" + voice
	s, ok := e.speeds[k]
	if !ok {
		s = newSpeed(initialCPS[engine], e.alpha)
		e.speeds[k] = s
	}
	return s
}

// route is the engine and voice that would speak a request for voice now.
func (e *Engine) route(voice string) (string, string) {
	if voice == "" {
		voice = e.voices[0]
	}
	return routeOf(e.syn, voice)
}

func routeOf(s Synthesizer, voice string) (string, string) {
	if r, ok := s.(interface{ route(string) (string, string) }); ok {
		return r.route(voice)
	}
	if voice == "" || !slices.Contains(s.Voices(), voice) {
		voice = s.Voices()[0]
	}
	return s.Name(), voice
}

func (e *Engine) estimate(engine, voice string, chars int) time.Duration {
	return timeFor(chars, e.speed(engine, voice).get())
}

// Estimate is how long synthesising chars characters with voice ("" for
// the default) is expected to take, to the last chunk, at the speed
// learned for the engine that would speak it now.
func (e *Engine) Estimate(voice string, chars int) time.Duration {
	eng, v := e.route(voice)
	return e.estimate(eng, v, chars)
}

// MinEstimate is the least time synthesising chars characters with voice
// ("" for the default) can be expected to take: Estimate, or, for the
// remote engine with its Flite fallback, Flite's estimate when that is
// less, since a sentence the remote engine is not expected to finish in
// the time left is spoken by Flite. A sentence is worth starting when
// MinEstimate fits in the time left; the answer is sized by Estimate, so
// that the engine that would speak it now can say it all.
func (e *Engine) MinEstimate(voice string, chars int) time.Duration {
	if f, ok := e.syn.(*fallback); ok {
		if voice == "" {
			voice = e.voices[0]
		}
		return f.minEstimate(voice, chars)
	}
	return e.Estimate(voice, chars)
}

// CharsIn is how many characters voice is expected to synthesise in d.
func (e *Engine) CharsIn(voice string, d time.Duration) int {
	return charsIn(d, e.speed(e.route(voice)).get())
}

// kindOf labels a failure for metrics. When ctx is done the failure is
// the caller's own cancellation, whatever the engine reported.
func kindOf(ctx context.Context, err error) string {
	switch {
	case ctx.Err() != nil:
		return provider.KindCanceled.String()
	case errors.Is(err, ErrVoice):
		return "voice"
	case errors.Is(err, ErrRate):
		return "rate"
	case errors.Is(err, ErrEmpty):
		return "empty"
	case errors.Is(err, ErrUnavailable):
		return "unavailable"
	}
	if pe, ok := errors.AsType[*provider.Error](err); ok {
		return pe.Kind.String()
	}
	return "internal"
}
