// Package flite is voiced's embedded speech synthesiser: CMU Flite linked
// through cgo (Debian flite1-dev), with the voices slt (the default, US
// English female), kal, awb and rms. It needs no network and no key.
//
// The voices are registered once per process and shared by every
// synthesis; at most Config.Parallel syntheses run at once, because each
// holds an OS thread in C. Audio is streamed from Flite's vocoder through
// its audio callback, resampled to the requested rate and emitted in
// chunks; a cancelled context stops Flite at its next callback. Without
// cgo (or with the noflite build tag) New reports the engine unavailable.
package flite

import (
	"context"
	"fmt"
	"runtime"
	"time"

	"github.com/voiced/voiced/internal/stages/tts/speech"
)

// Name is the engine's name.
const Name = "flite"

// Packages are the Debian packages the engine needs at build time.
const Packages = "flite1-dev"

// DefaultVoice is the voice used when a request names none.
const DefaultVoice = "slt"

// voiceNames are the voices, the default first.
var voiceNames = []string{"slt", "kal", "awb", "rms"}

// Config configures the engine. The zero value means the defaults noted.
type Config struct {
	// Parallel is the most syntheses running at once; 0 means one per
	// CPU. More wait for a slot (or their context).
	Parallel int
}

// Engine synthesises speech with Flite. It is safe for concurrent use.
type Engine struct {
	sem     chan struct{}
	filters speech.Filters
}

// New registers the voices (once per process) and returns the engine.
func New(cfg Config) (*Engine, error) {
	if err := register(); err != nil {
		return nil, fmt.Errorf("flite: %w", err)
	}
	n := cfg.Parallel
	if n <= 0 {
		n = runtime.NumCPU()
	}
	return &Engine{sem: make(chan struct{}, n)}, nil
}

// Name is "flite".
func (e *Engine) Name() string { return Name }

// Voices lists the voices, the default first.
func (e *Engine) Voices() []string { return Voices() }

// Voices lists the engine's voices, the default first, without building
// it: for checking a voice's name before the start.
func Voices() []string { return append([]string(nil), voiceNames...) }

// Synthesize speaks req.Text and calls emit with each chunk of audio at
// req.SampleRate, in order, from the calling goroutine (emit owns the
// slice and must not block: Flite holds an OS thread meanwhile). It
// returns when the audio is complete, or as soon as ctx is done (then
// with ctx's error and the Result of the audio emitted so far). The text
// is cleaned first (see Clean); text with nothing speakable is ErrEmpty.
func (e *Engine) Synthesize(ctx context.Context, req speech.Request, emit func(pcm []int16)) (speech.Result, error) {
	start := time.Now()
	res := speech.Result{Engine: Name, Voice: req.Voice, SampleRate: req.SampleRate, TextLen: len(req.Text)}
	if res.Voice == "" {
		res.Voice = DefaultVoice
	}
	v, err := voiceByName(res.Voice)
	if err != nil {
		return res, err
	}
	if err := speech.CheckRate(req.SampleRate); err != nil {
		return res, fmt.Errorf("flite: %w", err)
	}
	text, offsets := Clean(req.Text)
	if !speakable(text) {
		return res, fmt.Errorf("flite: %w", speech.ErrEmpty)
	}
	res.Chars = len(text)
	select {
	case e.sem <- struct{}{}:
	case <-ctx.Done():
		return res, context.Cause(ctx)
	}
	defer func() { <-e.sem }()
	err = synth(ctx, v, text, offsets, &e.filters, start, &res, emit)
	res.Elapsed = time.Since(start)
	return res, err
}
