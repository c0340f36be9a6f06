package loadgen

import (
	"context"
	"sync"
	"time"
)

// lagProbe measures how late the client's own timers fire. The client
// shares the machine with the server; when its goroutines run late, its
// latency figures include that delay, and the report says how much.
type lagProbe struct {
	mu  sync.Mutex
	lag []time.Duration // guarded by mu
}

const lagEvery = 10 * time.Millisecond

func (p *lagProbe) loop(ctx context.Context) {
	t := time.NewTimer(lagEvery)
	defer t.Stop()
	want := time.Now().Add(lagEvery)
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := time.Now()
		p.mu.Lock()
		p.lag = append(p.lag, now.Sub(want))
		p.mu.Unlock()
		want = now.Add(lagEvery)
		t.Reset(lagEvery)
	}
}

func (p *lagProbe) dist() Dist {
	p.mu.Lock()
	defer p.mu.Unlock()
	return distOf(p.lag)
}
