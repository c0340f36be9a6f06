package session

import (
	"runtime/debug"
	"sync"
	"time"
)

// memReturn gives the memory a burst of upgrades freed back to the
// operating system once the burst is over. Each upgrade passes through
// net/http's buffers (4 KiB each way, which hijacking hands over and
// nothing returns to net/http's pools), a request and a stack, so a burst
// of thousands leaves the heap far above what the sessions it opened
// keep; the runtime reuses those pages but returns them only slowly (its
// background scavenger, paced at about 1% of a CPU, aims at the heap goal
// of the last collection, which the burst inflated). Once at least burst
// sessions were admitted since the last return (a burst, or a trickle
// that adds up) and then none for quiet, it runs free
// (debug.FreeOSMemory: a collection, then every free page returned),
// unless the process is busy, in which case it waits another quiet.
//
// It costs nothing per admission but a clock read, and nothing per frame
// or message; the collection and the returns cost CPU once per burst, at
// a moment when the burst is over, and the next burst takes its pages
// back from the kernel (page faults) instead of from the runtime.
type memReturn struct {
	quiet time.Duration
	burst int
	free  func() (cpu time.Duration) // returns the memory; the CPU it cost the process
	// busy, when not nil, reports that the process runs late or sheds:
	// the return then waits another quiet period, since its collection
	// and the page faults after it would add to the delay the requests in
	// flight already meet (a burst's sessions usually start talking).
	busy func() bool

	mu       sync.Mutex
	admitted int       // since the last return; guarded by mu
	last     time.Time // the last admission; guarded by mu
	timer    *time.Timer
	stopped  bool           // guarded by mu
	running  sync.WaitGroup // a free in progress
	returned func(cpu time.Duration)
}

// admit counts an admitted session.
func (m *memReturn) admit() {
	if m.quiet <= 0 {
		return
	}
	now := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.admitted++
	m.last = now
	if m.admitted >= m.burst && m.timer == nil && !m.stopped {
		m.timer = time.AfterFunc(m.quiet, m.fire)
	}
}

// fire returns the memory if no session was admitted for quiet, or waits
// again for the rest of quiet since the last one.
func (m *memReturn) fire() {
	m.mu.Lock()
	if m.stopped {
		m.mu.Unlock()
		return
	}
	if since := time.Since(m.last); since < m.quiet {
		m.timer.Reset(m.quiet - since)
		m.mu.Unlock()
		return
	}
	if m.busy != nil && m.busy() {
		m.timer.Reset(m.quiet)
		m.mu.Unlock()
		return
	}
	m.admitted, m.timer = 0, nil
	m.running.Add(1)
	m.mu.Unlock()
	defer m.running.Done()
	cpu := m.free()
	if m.returned != nil {
		m.returned(cpu)
	}
}

// stop cancels a pending return and waits for one in progress.
func (m *memReturn) stop() {
	m.mu.Lock()
	m.stopped = true
	if m.timer != nil {
		m.timer.Stop()
	}
	m.mu.Unlock()
	m.running.Wait()
}

// freeOSMemory returns the free memory and reports the process's CPU
// time meanwhile (an upper bound of the return's own when other work
// runs).
func freeOSMemory() time.Duration {
	before := processCPU()
	debug.FreeOSMemory()
	return processCPU() - before
}
