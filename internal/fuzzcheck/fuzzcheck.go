// Package fuzzcheck holds the checks voiced's fuzz targets share. It is
// imported only by tests.
package fuzzcheck

import (
	"runtime/metrics"
	"testing"
)

const heapAllocs = "/gc/heap/allocs:bytes"

// HeapAllocs returns the bytes allocated on the heap while f ran. Small
// allocations are counted a span (a few KiB) at a time, so the figure is
// coarse; it is meant to catch an allocation sized by a length read from
// the input, which is counted exactly.
func HeapAllocs(f func()) uint64 {
	s := []metrics.Sample{{Name: heapAllocs}}
	metrics.Read(s)
	before := s[0].Value.Uint64()
	f()
	metrics.Read(s)
	return s[0].Value.Uint64() - before
}

// Slack is what AllocBounded allows on top of its per-byte bound, for the
// span granularity of HeapAllocs and fixed buffers (a bufio.Scanner's
// 16 KiB, for one).
const Slack = 1 << 20

// AllocBounded fails t when f allocates more than perByte bytes for each of
// the n input bytes, plus Slack: decoding must cost memory in proportion to
// what was received, never to a length the input declares.
func AllocBounded(t testing.TB, n, perByte int, f func()) {
	t.Helper()
	limit := uint64(n)*uint64(perByte) + Slack
	if got := HeapAllocs(f); got > limit {
		t.Fatalf("allocated %d bytes decoding %d input bytes (limit %d)", got, n, limit)
	}
}
