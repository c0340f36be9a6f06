package client

import (
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestStallGuard(t *testing.T) {
	const timeout = 5 * time.Second
	tests := []struct {
		name string
		run  func(g *stallGuard) // in the bubble; time advances by sleeping
		drop bool
	}{
		{
			name: "a write that never ends is dropped",
			run: func(g *stallGuard) {
				g.begin()
				time.Sleep(timeout + time.Millisecond)
			},
			drop: true,
		},
		{
			name: "a write that ends in time is not",
			run: func(g *stallGuard) {
				g.begin()
				time.Sleep(timeout - time.Millisecond)
				g.end()
				time.Sleep(3 * timeout)
			},
		},
		{
			name: "writes that keep completing are not dropped, however long they overlap",
			run: func(g *stallGuard) {
				g.begin() // one write stays pending throughout
				for range 10 {
					time.Sleep(timeout / 2)
					g.begin()
					g.end()
				}
				g.end()
				time.Sleep(3 * timeout)
			},
		},
		{
			name: "the timeout runs from the last progress",
			run: func(g *stallGuard) {
				g.begin()
				g.begin()
				time.Sleep(timeout - time.Second)
				g.end() // progress; the other write stays stuck
				time.Sleep(timeout + time.Millisecond)
			},
			drop: true,
		},
		{
			name: "an idle guard re-arms for the next write",
			run: func(g *stallGuard) {
				g.begin()
				g.end()
				time.Sleep(3 * timeout) // the timer fires and disarms
				g.begin()
				time.Sleep(timeout + time.Millisecond)
			},
			drop: true,
		},
		{
			name: "a stopped guard never drops",
			run: func(g *stallGuard) {
				g.begin()
				g.stop()
				time.Sleep(3 * timeout)
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var drops atomic.Int32
				g := newStallGuard(timeout, func() { drops.Add(1) })
				tt.run(g)
				synctest.Wait()
				want := int32(0)
				if tt.drop {
					want = 1
				}
				assert.Equal(t, want, drops.Load())
				g.stop()
			})
		})
	}
}
