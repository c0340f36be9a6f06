// Package vadtest has a scriptable voice activity detector for tests of
// turn logic without acoustics: each frame's decision comes from a script.
package vadtest

import (
	"fmt"

	"github.com/voiced/voiced/internal/vad"
)

// Script is a detector that answers from a script, one character per
// vad.FrameMs frame: 'S' (or 's') is speech, anything else is not. Past
// the end of the script every frame is non-speech. Like the real
// detector it is per-stream and stateful, and it accepts only frames of
// vad.FrameLen(Rate) samples at a rate the real detector accepts.
type Script struct {
	Rate   int
	Frames string
	next   int
	closed bool
}

var _ vad.Detector = (*Script)(nil)

// New returns a script detector at rate Hz.
func New(rate int, frames string) *Script { return &Script{Rate: rate, Frames: frames} }

// Process answers for the next frame.
func (s *Script) Process(frame []int16) (bool, error) {
	if s.closed {
		return false, fmt.Errorf("vadtest: detector closed")
	}
	ok := false
	for _, r := range vad.Rates {
		ok = ok || r == s.Rate
	}
	if !ok || len(frame) != vad.FrameLen(s.Rate) {
		return false, fmt.Errorf("%w: %d samples at %d Hz", vad.ErrFrame, len(frame), s.Rate)
	}
	i := s.next
	s.next++
	return i < len(s.Frames) && (s.Frames[i] == 'S' || s.Frames[i] == 's'), nil
}

// Frame returns how many frames have been processed.
func (s *Script) Frame() int { return s.next }

// Reset starts the script again.
func (s *Script) Reset() { s.next = 0 }

// Close marks the detector closed; Process fails after it.
func (s *Script) Close() { s.closed = true }

// Closed reports whether Close was called.
func (s *Script) Closed() bool { return s.closed }
