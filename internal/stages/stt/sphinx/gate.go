package sphinx

import (
	"context"
	"slices"
	"sync"
)

// gate bounds how many decoders compute at once (one per CPU by default)
// and serves urgent work first.
//
// Without it every stream's cgo call runs on its own OS thread, and with
// more streams than CPUs the kernel shares the CPUs out evenly: a final
// pass, which a caller is waiting on, then runs at a fraction of a core
// while streams that are seconds away from needing their results take the
// rest. Streaming audio can wait a few blocks unnoticed (the frames queue,
// and are decoded as soon as a CPU is free); the end of an utterance
// cannot. So final passes, and the audio left of an utterance whose final
// frame has arrived, are urgent: they take the next free CPU, ahead of any
// streaming block waiting for one.
type gate struct {
	mu     sync.Mutex
	free   int
	urgent []chan struct{} // waiters, first come first served
	normal []chan struct{}
}

func newGate(n int) *gate { return &gate{free: n} }

// acquire waits for a CPU. It returns ctx's cause if ctx ends first (or
// has already ended: no work starts for a request that is over), and then
// holds nothing.
func (g *gate) acquire(ctx context.Context, urgent bool) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	g.mu.Lock()
	if g.free > 0 && len(g.urgent) == 0 && (urgent || len(g.normal) == 0) {
		g.free--
		g.mu.Unlock()
		return nil
	}
	ready := make(chan struct{})
	q := &g.normal
	if urgent {
		q = &g.urgent
	}
	*q = append(*q, ready)
	g.mu.Unlock()

	select {
	case <-ready:
		return nil
	case <-ctx.Done():
		g.mu.Lock()
		select {
		case <-ready:
			// Granted as ctx ended: hand the CPU on.
			g.mu.Unlock()
			g.release()
		default:
			*q = slices.DeleteFunc(*q, func(c chan struct{}) bool { return c == ready })
			g.mu.Unlock()
		}
		return context.Cause(ctx)
	}
}

// release gives a CPU back, to the first urgent waiter if there is one.
func (g *gate) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, q := range []*[]chan struct{}{&g.urgent, &g.normal} {
		if len(*q) > 0 {
			close((*q)[0])
			*q = (*q)[1:]
			return
		}
	}
	g.free++
}
