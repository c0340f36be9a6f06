// Package speech declares what every speech synthesis engine of voiced
// shares: the request, the result with its word timings, the errors, the
// output sample rates, and Output, which resamples an engine's native
// audio to the rate the client asked for and cuts it into chunks of at
// most MaxChunk. The engines (packages flite and remote) import it;
// package tts selects among them, so the engines never depend on it.
package speech

import (
	"errors"
	"fmt"
	"slices"
	"time"
)

// MaxChunk is the most audio one chunk carries.
const MaxChunk = 200 * time.Millisecond

// SampleRates are the output rates every engine offers (audio is
// resampled from the engine's native rate). The first is the lowest.
var SampleRates = []int{8000, 16000, 22050, 24000, 44100, 48000}

// Errors an engine returns, checked with errors.Is.
var (
	// ErrUnavailable: the engine cannot synthesise at all (not in this
	// build, not configured).
	ErrUnavailable = errors.New("speech synthesis unavailable")
	// ErrVoice: the request names a voice the engine does not have.
	ErrVoice = errors.New("unknown voice")
	// ErrRate: the request asks for a sample rate not in SampleRates.
	ErrRate = errors.New("unsupported sample rate")
	// ErrEmpty: nothing speakable is left of the text after cleanup.
	ErrEmpty = errors.New("nothing to say")
)

// CheckRate returns an error wrapping ErrRate unless rate is one of
// SampleRates.
func CheckRate(rate int) error {
	if !slices.Contains(SampleRates, rate) {
		return fmt.Errorf("%w: %d Hz (want one of %v)", ErrRate, rate, SampleRates)
	}
	return nil
}

// Request is one piece of text to speak, typically one sentence: engines
// analyse the whole text before the first audio, so shorter text means
// earlier audio.
type Request struct {
	Text string
	// Voice is one of the engine's voices; "" means its default.
	Voice string
	// SampleRate is the output rate in Hz, one of SampleRates.
	SampleRate int
}

// Word is the timing of one spoken word within the audio of its request.
type Word struct {
	// Text is the word as spoken: the engine's normalised form (flite
	// says "twelve dollars" for "$12").
	Text string
	// From and To are the bytes of Request.Text the word was read from
	// (the whole token: words of one token share it).
	From, To int
	// Start and End are offsets from the start of the request's audio.
	Start, End time.Duration
}

// Result is the record of one synthesis. Engines fill what they learned
// even when they return an error (a stopped synthesis still has the
// audio sent until then, and flite's word timings).
type Result struct {
	Engine string
	Voice  string
	// SampleRate is the rate of the audio emitted.
	SampleRate int
	// Samples and Chunks count the audio emitted.
	Samples int
	Chunks  int
	// Chars is how many characters of text were synthesised (after the
	// engine's cleanup); the learned speed is in these.
	Chars int
	// TextLen is len(Request.Text), for Heard.
	TextLen int
	// Words are the word timings, in order; nil when the engine gives
	// none (the remote engine).
	Words []Word
	// Complete is whether the audio emitted is the whole text's (the
	// engine's audio ended and was all emitted), not a stopped or cut
	// synthesis's.
	Complete bool
	// FirstChunk is the time from the call to the first chunk emitted,
	// 0 when none was.
	FirstChunk time.Duration
	// Elapsed is the whole call's time.
	Elapsed time.Duration
}

// Audio is the length of the audio emitted.
func (r Result) Audio() time.Duration {
	if r.SampleRate <= 0 {
		return 0
	}
	return time.Duration(r.Samples) * time.Second / time.Duration(r.SampleRate)
}

// RTF is the real-time factor: synthesis time over audio length (0.05
// means 20 times faster than real time); 0 when there was no audio.
func (r Result) RTF() float64 {
	if a := r.Audio(); a > 0 {
		return r.Elapsed.Seconds() / a.Seconds()
	}
	return 0
}

// Heard is how many bytes of Request.Text a listener has heard after
// played of this request's audio: up to the end of the last word whose
// audio ended by then. Without word timings it is all or nothing: the
// whole text once all the audio of a complete synthesis was played, else 0.
func (r Result) Heard(played time.Duration) int {
	if r.Complete && played >= r.Audio() && r.Samples > 0 {
		return r.TextLen
	}
	heard := 0
	for _, w := range r.Words {
		if w.End > played {
			break
		}
		heard = w.To
	}
	return heard
}
