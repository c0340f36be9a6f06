//go:build cgo

package vad

/*
#cgo pkg-config: webrtc-audio-processing
#include <stddef.h>
#include <stdint.h>

// Debian's libwebrtc-audio-processing-dev (0.3) exports the detector but
// ships no header for it: these are webrtc_vad.h's prototypes.
typedef struct WebRtcVadInst VadInst;
VadInst* WebRtcVad_Create(void);
void WebRtcVad_Free(VadInst* handle);
int WebRtcVad_Init(VadInst* handle);
int WebRtcVad_set_mode(VadInst* handle, int mode);
int WebRtcVad_Process(VadInst* handle, int fs, const int16_t* audio_frame, size_t frame_length);
int WebRtcVad_ValidRateAndFrameLength(int rate, size_t frame_length);

// vad_core.h, exported by the same library: the decision before the
// detector's built-in hangover. WebRtcVad_Process folds that hangover (60
// to 140 ms at 20 ms frames) into "speech"; these return 1 for speech, 0
// for none and 2+n for a hangover frame with n more to come, so the
// endpointer can place the end of speech where it was and own the hangover.
int WebRtcVad_CalcVad8khz(VadInst* inst, const int16_t* frame, size_t frame_length);
int WebRtcVad_CalcVad16khz(VadInst* inst, const int16_t* frame, size_t frame_length);
int WebRtcVad_CalcVad32khz(VadInst* inst, const int16_t* frame, size_t frame_length);
int WebRtcVad_CalcVad48khz(VadInst* inst, const int16_t* frame, size_t frame_length);

static int vad_raw(VadInst* inst, int rate, const int16_t* frame, size_t n) {
	switch (rate) {
	case 8000: return WebRtcVad_CalcVad8khz(inst, frame, n);
	case 16000: return WebRtcVad_CalcVad16khz(inst, frame, n);
	case 32000: return WebRtcVad_CalcVad32khz(inst, frame, n);
	case 48000: return WebRtcVad_CalcVad48khz(inst, frame, n);
	}
	return -1;
}
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// WebRTC is WebRTC's GMM voice activity detector for one stream: energies
// in six sub-bands between 80 and 4000 Hz (input is downsampled to 8 kHz
// first), two-Gaussian speech and noise models per band adapted online,
// and a likelihood-ratio test. Process reports the decision without the
// library's hangover (see Smoothed).
type WebRTC struct {
	inst *C.VadInst
	rate int
	mode C.int
	// Smoothed makes Process report WebRTC's own decision, hangover
	// included (WebRtcVad_Process). Off by default: the endpointer has a
	// hangover of its own and needs the end of speech where it was.
	Smoothed bool
}

var _ Detector = (*WebRTC)(nil)

// NewWebRTC returns a detector for a stream at rate Hz (8000, 16000,
// 32000 or 48000) with the given aggressiveness.
func NewWebRTC(rate int, mode Mode) (*WebRTC, error) {
	if err := checkRate(rate); err != nil {
		return nil, err
	}
	m, err := mode.webrtc()
	if err != nil {
		return nil, err
	}
	inst := C.WebRtcVad_Create()
	if inst == nil {
		return nil, fmt.Errorf("vad: WebRtcVad_Create failed")
	}
	w := &WebRTC{inst: inst, rate: rate, mode: C.int(m)}
	if err := w.init(); err != nil {
		w.Close()
		return nil, err
	}
	return w, nil
}

func (w *WebRTC) init() error {
	if C.WebRtcVad_Init(w.inst) != 0 {
		return fmt.Errorf("vad: WebRtcVad_Init failed")
	}
	if C.WebRtcVad_set_mode(w.inst, w.mode) != 0 {
		return fmt.Errorf("%w: WebRTC mode %d", ErrConfig, w.mode)
	}
	return nil
}

// Process classifies one FrameMs frame.
func (w *WebRTC) Process(frame []int16) (bool, error) {
	if w.inst == nil {
		return false, fmt.Errorf("vad: detector closed")
	}
	if len(frame) != FrameLen(w.rate) {
		return false, fmt.Errorf("%w: %d samples at %d Hz (want %d)", ErrFrame, len(frame), w.rate, FrameLen(w.rate))
	}
	p := (*C.int16_t)(unsafe.Pointer(&frame[0]))
	n := C.size_t(len(frame))
	var r C.int
	if w.Smoothed {
		r = C.WebRtcVad_Process(w.inst, C.int(w.rate), p, n)
	} else {
		r = C.vad_raw(w.inst, C.int(w.rate), p, n)
	}
	if r < 0 {
		return false, fmt.Errorf("vad: WebRTC detector failed (%d)", int(r))
	}
	return r == 1 || (w.Smoothed && r > 0), nil
}

// Reset re-initialises the detector's models and filters, for a new
// stream; the mode is kept.
func (w *WebRTC) Reset() {
	if w.inst != nil {
		_ = w.init() // cannot fail on an instance that initialised once
	}
}

// Close frees the detector. It may be called more than once.
func (w *WebRTC) Close() {
	if w.inst != nil {
		C.WebRtcVad_Free(w.inst)
		w.inst = nil
	}
}

// validFrame reports whether WebRTC itself accepts samples at rate (the
// library's own check, used by the tests to keep FrameLen honest).
func validFrame(rate, samples int) bool {
	return C.WebRtcVad_ValidRateAndFrameLength(C.int(rate), C.size_t(samples)) == 0
}

// Available reports whether the WebRTC detector is in this build.
const Available = true
