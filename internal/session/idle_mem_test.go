package session_test

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/pipeline"
	"github.com/voiced/voiced/internal/session"
)

// TestIdleSessionMemory measures what an idle session costs: heap and
// goroutine stacks, per session, over 500 sessions, after what a session
// does before it goes quiet. The figure for 5,000 sessions from the load
// tool is in docs/benchmarks.md; this keeps a regression from creeping in
// unnoticed.
//
// The stack bound is the point: on Linux an idle session parks and keeps
// no goroutine at all, whatever it did before going quiet (writing
// session.ready, answering pings, a request). Elsewhere its goroutine
// blocks in the read for as long as the client stays, and the runtime
// only shrinks a stack less than a quarter used, which the blocked read is
// not on 8 KiB: so that goroutine must be on a 4 KiB stack.
func TestIdleSessionMemory(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("memory figures are not meaningful under -race or -short")
	}
	const n = 500
	cases := []struct {
		name string
		use  func(c *client, i int) // what each session does before it goes quiet
		// maxHeap bounds the live heap per session, server and client
		// together, in KiB: 14.7-14.8 idle and 18.4 after a request
		// (2026-12-01, parked sessions), of which the client's 4 KiB
		// buffers each way are about 9 KiB, and after a request the fake
		// stages' record of every stage's context about 2 KiB.
		maxHeap float64
	}{
		{"ready only", func(*client, int) {}, 17},
		{"after pings", func(c *client, _ int) {
			for range 5 { // as voiceload's clock sync does
				c.ping()
			}
		}, 17},
		{"after a request", func(c *client, i int) {
			id := fmt.Sprintf("r-%d", i)
			deadline := time.Now().Add(5 * time.Second)
			c.audio(id, 0, false, deadline)
			c.audio(id, 1, true, deadline)
			m, _ := c.terminal(id)
			resultOf(t, m)
		}, 21},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, &fakeStages{}, pipeline.Config{}, session.Config{})
			// The clients live in this process too, so the heap figure is
			// an upper bound: it includes each client connection's
			// buffers. The clients start no goroutines, so the stacks are
			// the server's.
			var before, after runtime.MemStats
			// Two collections here too: the first only moves what pools
			// hold (an earlier subtest's client buffers) to their victim
			// caches.
			runtime.GC()
			runtime.GC()
			runtime.ReadMemStats(&before)
			goroutines := runtime.NumGoroutine()
			for i := range n {
				tc.use(h.dial(), i)
			}
			require.Equal(t, n, h.srv.Sessions(), "every session was admitted before it sent session.ready")
			// A request's goroutines end just after its terminal message is
			// written; wait for them (bounded by the harness's context).
			// Besides the sessions' (none where they park), the server's
			// reaper and parker and the test server's accept loop run.
			for runtime.NumGoroutine() > goroutines+n+3 && h.ctx.Err() == nil {
				runtime.Gosched()
			}
			// Two collections: each can halve a stack once.
			runtime.GC()
			runtime.GC()
			runtime.ReadMemStats(&after)
			// Live bytes: in-use spans would also count what an earlier
			// subtest left fragmented, or not, depending on the order.
			// Signed: with no stack per session, what earlier tests' ended
			// goroutines held can make the stacks shrink.
			heap := float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / n / 1024
			stack := float64(int64(after.StackInuse)-int64(before.StackInuse)) / n / 1024
			t.Logf("server + client per idle session: %.1f KiB (live heap %.1f KiB, stacks %.1f KiB)", heap+stack, heap, stack)
			maxStack := 5.0 // a 4 KiB stack each
			if runtime.GOOS == "linux" {
				maxStack = 1.0 // none: sessions park (the rest is the test's own)
			}
			require.Less(t, stack, maxStack, "KiB of stack per idle session")
			require.Less(t, heap, tc.maxHeap, "KiB of live heap per idle session, server and client")
		})
	}
}
