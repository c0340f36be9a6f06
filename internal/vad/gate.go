package vad

import (
	"fmt"
	"math"
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
}

// Gate defaults, chosen by measurement (docs/benchmarks.md).
const (
	DefaultGateMarginDB = 6.0
	DefaultGateMinDBFS  = -60.0
	DefaultGateWindowMs = 2000

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
	switch {
	case c.MarginDB > 30:
		return c, fmt.Errorf("%w: gate margin %.1f dB (want up to 30)", ErrConfig, c.MarginDB)
	case c.MinDBFS < -96 || c.MinDBFS > -20:
		return c, fmt.Errorf("%w: gate minimum %.1f dBFS (want -96..-20)", ErrConfig, c.MinDBFS)
	case c.WindowMs < 400 || c.WindowMs > 10000:
		return c, fmt.Errorf("%w: noise floor window %d ms (want 400..10000)", ErrConfig, c.WindowMs)
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

	blockLen int       // frames a block
	blocks   []float64 // minima of the last complete blocks; +Inf unused
	cur      float64   // minimum of the block in progress
	inBlock  int
	next     int // the block that cur replaces

	frames, skipped int64
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
		det:      det,
		rate:     rate,
		off:      c.MarginDB < 0,
		margin:   dbToPow(c.MarginDB),
		minPow:   dbToPow(c.MinDBFS),
		blockLen: max(1, c.WindowMs/FrameMs/gateBlocks),
		blocks:   make([]float64, gateBlocks),
	}
	g.clear()
	return g, nil
}

func (g *Gate) clear() {
	for i := range g.blocks {
		g.blocks[i] = math.Inf(1)
	}
	g.cur, g.inBlock, g.next = math.Inf(1), 0, 0
	g.frames, g.skipped = 0, 0
}

func dbToPow(db float64) float64 { return math.Pow(10, db/10) }

// Process gates one frame, then asks the detector.
func (g *Gate) Process(frame []int16) (bool, error) {
	if len(frame) != FrameLen(g.rate) {
		return false, fmt.Errorf("%w: %d samples at %d Hz (want %d)", ErrFrame, len(frame), g.rate, FrameLen(g.rate))
	}
	g.frames++
	p := power(frame)
	floor := g.floor() // before this frame: a loud frame must not be its own floor
	g.cur = min(g.cur, p)
	if g.inBlock++; g.inBlock == g.blockLen {
		g.blocks[g.next] = g.cur
		g.next = (g.next + 1) % len(g.blocks)
		g.cur, g.inBlock = math.Inf(1), 0
	}
	if !g.off && (p < g.minPow || (!math.IsInf(floor, 1) && p < floor*g.margin)) {
		g.skipped++
		return false, nil
	}
	return g.det.Process(frame)
}

// floor is the quietest frame power in the window; +Inf before any.
func (g *Gate) floor() float64 {
	f := g.cur
	for _, b := range g.blocks {
		f = min(f, b)
	}
	return f
}

// power is the frame's mean square in full-scale units (1.0 = a full-scale
// square wave).
func power(frame []int16) float64 {
	var sum int64
	for _, s := range frame {
		sum += int64(s) * int64(s)
	}
	return float64(sum) / float64(len(frame)) / (32768 * 32768)
}

// FloorDBFS is the tracked noise floor in dBFS (+Inf before any frame).
func (g *Gate) FloorDBFS() float64 { return 10 * math.Log10(g.floor()) }

// Skipped returns how many frames the gate decided without the detector,
// out of how many.
func (g *Gate) Skipped() (skipped, frames int64) { return g.skipped, g.frames }

// Reset forgets the stream: the floor and the detector's state.
func (g *Gate) Reset() {
	g.clear()
	g.det.Reset()
}

// Close closes the detector behind the gate.
func (g *Gate) Close() { g.det.Close() }
