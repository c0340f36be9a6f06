package llm

import (
	"sync"
	"time"
)

// speed learns a provider and model's time to first token and output
// tokens per second from recent requests (exponentially weighted moving
// averages), starting from configured values. The chain uses it to decide
// whether an attempt can still produce a few tokens in the time left,
// and to size maxOutputTokens to that time.
type speed struct {
	alpha float64
	// startTTFT and startTPS are the configured values, in the units of
	// ttft and tps.
	startTTFT, startTPS float64

	mu   sync.Mutex
	ttft float64 // seconds
	tps  float64 // tokens per second
}

func newSpeed(ttft time.Duration, tps, alpha float64) *speed {
	return &speed{alpha: alpha, startTTFT: ttft.Seconds(), startTPS: tps, ttft: ttft.Seconds(), tps: tps}
}

// start returns the configured time to first token and tokens per second.
func (s *speed) start() (time.Duration, float64) {
	return time.Duration(s.startTTFT * float64(time.Second)), s.startTPS
}

// relax moves a learned time to first token or tokens per second that is
// slower than the configured one a learning step back towards it. A
// provider skipped for its learned slowness teaches nothing new: without
// this, a slow spell that has passed would keep it skipped for good.
func (s *speed) relax() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ttft > s.startTTFT {
		s.ttft += s.alpha * (s.startTTFT - s.ttft)
	}
	if s.tps < s.startTPS {
		s.tps += s.alpha * (s.startTPS - s.tps)
	}
}

func (s *speed) get() (time.Duration, float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return time.Duration(s.ttft * float64(time.Second)), s.tps
}

func (s *speed) observeTTFT(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ttft += s.alpha * (d.Seconds() - s.ttft)
}

// observeTPS records tokens generated over d after the first token.
// Very short samples say little, so they are skipped.
func (s *speed) observeTPS(tokens int, d time.Duration) {
	if tokens < 2 || d < 5*time.Millisecond {
		return
	}
	v := min(float64(tokens-1)/d.Seconds(), 5000) // a burst of buffered tokens must not teach absurd speeds
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tps += s.alpha * (v - s.tps)
}

// tokensIn is how many tokens the provider is expected to generate in d
// after its first token.
func tokensIn(d time.Duration, tps float64) int {
	if d <= 0 {
		return 0
	}
	return int(d.Seconds() * tps)
}

// timeFor is how long the provider is expected to take for n tokens,
// first token included.
func timeFor(n int, ttft time.Duration, tps float64) time.Duration {
	if tps <= 0 {
		return ttft
	}
	return ttft + time.Duration(float64(n)/tps*float64(time.Second))
}

// Sizing a spoken answer: the audio is synthesised sentence by sentence
// while the answer streams, so with a synthesiser faster than the
// provider only the last sentence's synthesis follows the final token;
// with a slower one, synthesising the whole answer is what takes longest.
const (
	charsPerToken = 4   // English text, as tokenisers of chat models cut it
	tailSentence  = 100 // characters of the last sentence, synthesised after the final token
)

// outputTokens is the output cap of an attempt with budget: as many
// tokens as the provider is expected to stream in it and, when synth is
// not nil, as the synthesiser can also speak by then. It is at least lo
// and at most hi; the attempt itself was already judged worth making.
func outputTokens(budget, ttft time.Duration, tps float64, synth func(chars int) time.Duration, lo, hi int) int {
	if synth == nil {
		return min(max(tokensIn(budget-ttft, tps), lo), hi)
	}
	fits := func(n int) bool {
		chars := n * charsPerToken
		return timeFor(n, ttft, tps)+synth(min(chars, tailSentence)) <= budget && ttft+synth(chars) <= budget
	}
	// fits is monotone in n: find the largest n in [lo, hi] that fits.
	n := lo
	for step := hi; step > 0; step /= 2 {
		for n+step <= hi && fits(n+step) {
			n += step
		}
	}
	return n
}
