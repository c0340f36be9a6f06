// Package vad finds speech in a continuous audio stream: a frame-level
// voice activity detector behind a small interface (WebRTC's GMM detector
// through cgo, an adaptive energy gate in front of it), and on top of it
// an Endpointer that turns per-frame decisions into turns (speech start
// and end as positions in the stream, with pre-roll, a minimum speech
// length and an end-of-turn silence), as a server-side turn detector
// needs.
//
// Every detector and endpointer holds the state of one stream: make one
// per stream and never share it between goroutines.
package vad

import (
	"errors"
	"fmt"
)

// Detector classifies the frames of one audio stream as speech or not.
// Frames are 16-bit mono PCM, FrameMs long at the rate the detector was
// made for. It is stateful (its noise model adapts as the stream goes)
// and not safe for concurrent use.
type Detector interface {
	// Process classifies the next frame. A frame of the wrong length is
	// an error wrapping ErrFrame.
	Process(frame []int16) (speech bool, err error)
	// Reset forgets the stream, for a new one.
	Reset()
	// Close releases the detector (WebRTC's lives in C memory).
	Close()
}

// FrameMs is the frame length every detector here takes: 20 ms, a length
// WebRTC's detector accepts and the frame size clients and telephone
// media streams send.
const FrameMs = 20

var (
	// ErrUnavailable: the detector is not in this build (built without
	// cgo, or the engine name is unknown).
	ErrUnavailable = errors.New("vad: detector unavailable")
	// ErrRate: the sample rate is not one the detector accepts.
	ErrRate = errors.New("vad: unsupported sample rate")
	// ErrFrame: a frame is not FrameMs long at the detector's rate.
	ErrFrame = errors.New("vad: bad frame length")
	// ErrConfig: a setting is out of its documented range.
	ErrConfig = errors.New("vad: setting out of range")
)

// Rates are the sample rates the WebRTC detector accepts.
var Rates = []int{8000, 16000, 32000, 48000}

// FrameLen returns the samples in one frame at rate.
func FrameLen(rate int) int { return rate * FrameMs / 1000 }

func checkRate(rate int) error {
	for _, r := range Rates {
		if r == rate {
			return nil
		}
	}
	return fmt.Errorf("%w: %d Hz (want 8000, 16000, 32000 or 48000)", ErrRate, rate)
}

// Engine names for New.
const (
	// EngineWebRTC is WebRTC's GMM detector (cgo) behind the energy gate.
	EngineWebRTC = "webrtc"
)

// Mode is the WebRTC detector's aggressiveness. The zero value is
// DefaultMode.
type Mode int

// Modes, from most speech kept to fewest false alarms (WebRTC's modes 0
// to 3).
const (
	ModeDefault        Mode = iota // DefaultMode
	ModeQuality                    // WebRTC mode 0
	ModeLowBitrate                 // WebRTC mode 1
	ModeAggressive                 // WebRTC mode 2
	ModeVeryAggressive             // WebRTC mode 3
)

// DefaultMode is the mode chosen by measurement (docs/benchmarks.md,
// "Voice activity detection").
const DefaultMode = ModeAggressive

func (m Mode) webrtc() (int, error) {
	if m == ModeDefault {
		m = DefaultMode
	}
	if m < ModeQuality || m > ModeVeryAggressive {
		return 0, fmt.Errorf("%w: mode %d (want 1..4)", ErrConfig, m)
	}
	return int(m - ModeQuality), nil
}

// Options choose and tune a detector. The zero value means the defaults.
type Options struct {
	// Engine is the detector's name; "" means EngineWebRTC.
	Engine string
	// Mode is the WebRTC detector's aggressiveness.
	Mode Mode
	// Gate configures the energy gate in front of the detector.
	Gate GateConfig
}

// New returns a detector for one stream at rate Hz, the engine named in o
// behind an energy gate. Close it when the stream ends.
func New(rate int, o Options) (Detector, error) {
	if err := checkRate(rate); err != nil {
		return nil, err
	}
	switch o.Engine {
	case "", EngineWebRTC:
		w, err := NewWebRTC(rate, o.Mode)
		if err != nil {
			return nil, err
		}
		g, err := NewGate(w, rate, o.Gate)
		if err != nil {
			w.Close()
			return nil, err
		}
		return g, nil
	default:
		return nil, fmt.Errorf("%w: unknown engine %q", ErrUnavailable, o.Engine)
	}
}
