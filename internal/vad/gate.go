package vad

import (
	"fmt"
	"math"

	"github.com/voiced/voiced/internal/audio/level"
)

// GateConfig tunes the energy gate. The zero value means the defaults.
type GateConfig struct {
	// MarginDB: a frame less than this far above the tracked noise floor
	// is not speech, and the detector behind the gate is not run on it.
	// 0 means DefaultGateMarginDB; negative turns the gate off (every
	// frame goes to the detector). Range up to 30.
	MarginDB float64
	// MinDBFS: a frame quieter than this (RMS, dB below full scale) is
	// never speech. 0 means DefaultGateMinDBFS. Range -96..-20.
	MinDBFS float64
	// WindowMs is how far back the noise floor looks: the floor is the
	// quietest frame in about that much audio. 0 means
	// DefaultGateWindowMs. Range 400..10000.
	WindowMs int
	// ForegroundDB: a frame more than this far below the speaker's level
	// is background (a quieter second talker, a television) and not
	// speech. The level is the running average of frames the detector
	// judged speech in runs of 60 ms or more, and it sinks by
	// ForegroundDecayDBPerSec while no such run comes, so a voice that
	// stays alone long enough becomes the speaker. 0 means
	// DefaultGateForegroundDB; negative turns this off. Range up to 40.
	ForegroundDB float64
	// AskEveryFrame sends every frame the gate passes to the detector,
	// even those it is sure are speech (see sureDB); for measurement.
	AskEveryFrame bool
}

// Gate defaults, chosen by measurement (docs/benchmarks.md).
const (
	DefaultGateMarginDB = 6.0
	DefaultGateMinDBFS  = -60.0
	DefaultGateWindowMs = 2000
	// DefaultGateForegroundDB and the level's fall were chosen on the
	// second-talker condition of cmd/evalvad.
	DefaultGateForegroundDB = 10.0
	ForegroundDecayDBPerSec = 2.0
	foregroundRun           = 3    // frames: a run this long updates the level
	foregroundAlpha         = 0.05 // weight of a frame in the running level
	// sureDB: inside a run of speech, a frame at least as loud as the
	// speaker's level less this is speech without asking the detector
	// (it must also be sureAboveFloorDB above the noise floor). Speech
	// frames are the detector's expensive ones; this skips most of the
	// loud ones and none of the frames where speech starts or ends.
	sureDB           = 3.0
	sureAboveFloorDB = 20.0

	gateBlocks = 10 // the window is kept as the minima of this many blocks
)

func (c GateConfig) withDefaults() (GateConfig, error) {
	if c.MarginDB == 0 {
		c.MarginDB = DefaultGateMarginDB
	}
	if c.MinDBFS == 0 {
		c.MinDBFS = DefaultGateMinDBFS
	}
	if c.WindowMs == 0 {
		c.WindowMs = DefaultGateWindowMs
	}
	if c.ForegroundDB == 0 {
		c.ForegroundDB = DefaultGateForegroundDB
	}
	switch {
	case c.MarginDB > 30:
		return c, fmt.Errorf("%w: gate margin %.1f dB (want up to 30)", ErrConfig, c.MarginDB)
	case c.MinDBFS < -96 || c.MinDBFS > -20:
		return c, fmt.Errorf("%w: gate minimum %.1f dBFS (want -96..-20)", ErrConfig, c.MinDBFS)
	case c.WindowMs < 400 || c.WindowMs > 10000:
		return c, fmt.Errorf("%w: noise floor window %d ms (want 400..10000)", ErrConfig, c.WindowMs)
	case c.ForegroundDB > 40:
		return c, fmt.Errorf("%w: foreground margin %.1f dB (want up to 40)", ErrConfig, c.ForegroundDB)
	}
	return c, nil
}

// Gate is an energy gate with an adaptive noise floor in front of a
// detector. The floor is the quietest frame of the last WindowMs
// (minimum statistics, kept as the minima of gateBlocks blocks, so it
// costs O(1) a frame): it follows changing background noise within a
// window, and speech does not raise it, because the pauses between
// syllables are quieter than the speech. Only frames clearly above it go
// to the detector. Frames near the floor are background by any measure;
// skipping the GMM on them saves its cost and removes its false alarms in
// steady noise.
type Gate struct {
	det    Detector
	rate   int
	off    bool
	margin float64 // power ratio
	minPow float64 // mean square, in full-scale units squared
	// marginDB and minDB are margin and minPow in dB: no frame quieter
	// than both the floor plus marginDB and minDB is speech.
	marginDB, minDB float64

	blockLen int       // frames a block
	warmup   int64     // frames in the window: until then speech stays out of the floor
	blocks   []float64 // minima of the last complete blocks; +Inf unused
	cur      float64   // minimum of the block in progress
	inBlock  int
	next     int // the block that cur replaces

	fgOn    bool
	fg      float64 // foreground margin, dB
	fgDecay float64 // dB a frame
	level   float64 // the speaker's level, dBFS; NaN before the first run
	run     int     // frames in a row the detector judged speech

	shortcut  bool
	sureFloor float64 // power ratio above the floor for a sure frame

	frames, skipped, sure int64
}

var _ Detector = (*Gate)(nil)

// NewGate puts an energy gate in front of det, a detector for a stream at
// rate Hz.
func NewGate(det Detector, rate int, c GateConfig) (*Gate, error) {
	c, err := c.withDefaults()
	if err != nil {
		return nil, err
	}
	g := &Gate{
		det:       det,
		rate:      rate,
		off:       c.MarginDB < 0,
		margin:    dbToPow(c.MarginDB),
		minPow:    dbToPow(c.MinDBFS),
		marginDB:  c.MarginDB,
		minDB:     c.MinDBFS,
		blockLen:  max(1, c.WindowMs/FrameMs/gateBlocks),
		blocks:    make([]float64, gateBlocks),
		fgOn:      c.ForegroundDB >= 0,
		fg:        c.ForegroundDB,
		fgDecay:   ForegroundDecayDBPerSec * FrameMs / 1000,
		shortcut:  !c.AskEveryFrame,
		sureFloor: dbToPow(sureAboveFloorDB),
	}
	g.warmup = int64(g.blockLen * gateBlocks)
	g.clear()
	return g, nil
}

func (g *Gate) clear() {
	for i := range g.blocks {
		g.blocks[i] = math.Inf(1)
	}
	g.cur, g.inBlock, g.next = math.Inf(1), 0, 0
	g.level, g.run = math.NaN(), 0
	g.frames, g.skipped, g.sure = 0, 0, 0
}

func dbToPow(db float64) float64 { return math.Pow(10, db/10) }

// Process gates one frame, then asks the detector.
func (g *Gate) Process(frame []int16) (bool, error) {
	if len(frame) != FrameLen(g.rate) {
		return false, fmt.Errorf("%w: %d samples at %d Hz (want %d)", ErrFrame, len(frame), g.rate, FrameLen(g.rate))
	}
	g.frames++
	p := level.Power(frame)
	floor := g.floor() // before this frame: a loud frame must not be its own floor
	speech, err := g.decide(frame, p, floor)
	// Until the window has been filled once, a frame judged speech does
	// not join the floor: a stream that starts in the middle of speech
	// would otherwise take the speech for its noise floor and gate out
	// everything up to the first pause as quiet as that (a steady voice
	// or tone: the whole utterance). Frames judged not speech, and every
	// frame once the window is full, do.
	if !speech || g.frames > g.warmup {
		g.observe(p)
	}
	return speech, err
}

// observe adds a frame's power to the noise floor's window.
func (g *Gate) observe(p float64) {
	g.cur = min(g.cur, p)
	if g.inBlock++; g.inBlock == g.blockLen {
		g.blocks[g.next] = g.cur
		g.next = (g.next + 1) % len(g.blocks)
		g.cur, g.inBlock = math.Inf(1), 0
	}
}

// decide judges one frame of power p against the floor before it.
func (g *Gate) decide(frame []int16, p, floor float64) (bool, error) {
	if !g.off && (p < g.minPow || (!math.IsInf(floor, 1) && p < floor*g.margin)) {
		return g.skip(floor), nil
	}
	db := 10 * math.Log10(p)
	if g.fgOn && db < g.level-g.fg { // false while the level is NaN
		return g.skip(floor), nil
	}
	sure := g.shortcut && g.fgOn && g.run >= foregroundRun && db >= g.level-sureDB &&
		!math.IsInf(floor, 1) && p >= floor*g.sureFloor
	if sure {
		g.sure++
	} else {
		speech, err := g.det.Process(frame)
		if err != nil || !speech {
			g.run = 0
			g.sink(floor)
			return false, err
		}
	}
	if g.run++; g.run >= foregroundRun {
		if math.IsNaN(g.level) {
			g.level = db
		} else {
			g.level += foregroundAlpha * (db - g.level)
		}
	} else {
		g.sink(floor)
	}
	return true, nil
}

// skip decides a frame without the detector: not speech.
func (g *Gate) skip(floor float64) bool {
	g.skipped++
	g.run = 0
	g.sink(floor)
	return false
}

// sink lowers the speaker's level for a frame without speech from them,
// the floor (power) being floor, but not below the lowest level that
// still keeps anything out: the quietest frame the floor and MinDBFS let
// in, plus the foreground margin. Sinking further changes nothing the
// gate lets in and only delays the level's return to the speaker: after a
// minute's pause it lay 120 dB below them, and the running average took
// seconds of speech to climb back, the foreground test off all that
// while (a second talker or a television counted as speech at the start
// of every turn).
func (g *Gate) sink(floor float64) {
	next := g.level - g.fgDecay
	if !g.off {
		quietest := g.minDB
		if !math.IsInf(floor, 1) {
			quietest = max(quietest, 10*math.Log10(floor)+g.marginDB)
		}
		// Held, never raised: a floor that rose (speech in its window)
		// must not lift the level. NaN stays NaN.
		if bound := quietest + g.fg; next < bound {
			next = min(g.level, bound)
		}
	}
	g.level = next
}

// floor is the quietest frame power in the window; +Inf before any.
func (g *Gate) floor() float64 {
	f := g.cur
	for _, b := range g.blocks {
		f = min(f, b)
	}
	return f
}

// FloorDBFS is the tracked noise floor in dBFS (+Inf before any frame).
func (g *Gate) FloorDBFS() float64 { return 10 * math.Log10(g.floor()) }

// Skipped returns how many frames the gate decided without the detector,
// out of how many: skipped as not speech, sure as speech.
func (g *Gate) Skipped() (skipped, sure, frames int64) { return g.skipped, g.sure, g.frames }

// Reset forgets the stream: the floor and the detector's state.
func (g *Gate) Reset() {
	g.clear()
	g.det.Reset()
}

// Close closes the detector behind the gate.
func (g *Gate) Close() { g.det.Close() }
