//go:build !cgo

package vad

import "fmt"

// WebRTC is WebRTC's GMM voice activity detector. This build has no cgo,
// so it is unavailable: NewWebRTC returns ErrUnavailable.
type WebRTC struct {
	// Smoothed is kept for the API's sake; see the cgo build.
	Smoothed bool
}

var _ Detector = (*WebRTC)(nil)

// NewWebRTC reports that the detector needs cgo.
func NewWebRTC(rate int, mode Mode) (*WebRTC, error) {
	return nil, fmt.Errorf("%w: the WebRTC detector needs cgo (CGO_ENABLED=1) and libwebrtc-audio-processing-dev", ErrUnavailable)
}

// Process always fails: the detector is unavailable.
func (w *WebRTC) Process([]int16) (bool, error) { return false, ErrUnavailable }

// Reset does nothing.
func (w *WebRTC) Reset() {}

// Close does nothing.
func (w *WebRTC) Close() {}

func validFrame(rate, samples int) bool { return false }

// Available reports whether the WebRTC detector is in this build.
const Available = false
