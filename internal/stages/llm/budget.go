package llm

import (
	"sync"
	"time"
)

// retryBudget is a token bucket that caps retries at a fraction of
// requests, so an outage cannot turn into a retry storm (Finagle and
// Linkerd style: a ratio of requests plus a small floor per second).
// Every request deposits ratio tokens; time adds perSecond tokens per
// second; a retry takes one whole token. The bucket holds at most burst
// tokens and starts full.
type retryBudget struct {
	ratio, perSecond, burst float64

	mu     sync.Mutex
	tokens float64
	last   time.Time
}

func newRetryBudget(ratio, perSecond, burst float64) *retryBudget {
	return &retryBudget{ratio: ratio, perSecond: perSecond, burst: burst, tokens: burst, last: time.Now()}
}

// refill adds the time-based tokens; b.mu is held.
func (b *retryBudget) refill(now time.Time) {
	if el := now.Sub(b.last); el > 0 {
		b.tokens = min(b.burst, b.tokens+el.Seconds()*b.perSecond)
	}
	b.last = now
}

// deposit records one request.
func (b *retryBudget) deposit() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refill(time.Now())
	b.tokens = min(b.burst, b.tokens+b.ratio)
}

// withdraw takes a token for one retry; false means no retry now.
func (b *retryBudget) withdraw() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refill(time.Now())
	// The epsilon keeps ten deposits of 0.1 worth one retry despite
	// floating-point rounding.
	if b.tokens < 1-1e-9 {
		return false
	}
	b.tokens = max(b.tokens-1, 0)
	return true
}
