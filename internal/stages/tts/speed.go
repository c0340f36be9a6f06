package tts

import (
	"sync"
	"time"
)

// speed learns an engine and voice's synthesis speed, in characters of
// text per second of synthesis time (to the last chunk), from recent
// complete syntheses (an exponentially weighted moving average),
// starting from a configured value. It lets the pipeline size the LLM's
// answer so that its synthesis fits in the time left, as the LLM chain's
// tokens-per-second does for generation.
type speed struct {
	alpha float64

	mu  sync.Mutex
	cps float64
}

// maxCPS bounds what one sample can teach: a sentence of silence or a
// cached answer must not teach absurd speeds.
const maxCPS = 20000

func newSpeed(cps, alpha float64) *speed { return &speed{alpha: alpha, cps: cps} }

func (s *speed) get() float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cps
}

// observe records chars synthesised in d. Very short samples say more
// about overhead than speed, so they are skipped.
func (s *speed) observe(chars int, d time.Duration) {
	if chars < 8 || d < time.Millisecond {
		return
	}
	v := min(float64(chars)/d.Seconds(), maxCPS)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cps += s.alpha * (v - s.cps)
}

// atMost records that chars were not all synthesised in d (the
// synthesis was stopped by its caller's deadline or cancellation): the
// speed is below chars/d. A learned speed above that bound moves towards
// it, so an engine slower than its estimate, whose every sentence is cut,
// still teaches its speed; a bound above the learned speed (a sentence
// cut early, a barge-in) says nothing new.
func (s *speed) atMost(chars int, d time.Duration) {
	if chars < 8 || d < time.Millisecond {
		return
	}
	v := float64(chars) / d.Seconds()
	s.mu.Lock()
	defer s.mu.Unlock()
	if v < s.cps {
		s.cps += s.alpha * (v - s.cps)
	}
}

// timeFor is the expected synthesis time of chars characters.
func timeFor(chars int, cps float64) time.Duration {
	if chars <= 0 || cps <= 0 {
		return 0
	}
	return time.Duration(float64(chars) / cps * float64(time.Second))
}

// charsIn is how many characters are expected to be synthesised in d.
func charsIn(d time.Duration, cps float64) int {
	if d <= 0 {
		return 0
	}
	return int(d.Seconds() * cps)
}
