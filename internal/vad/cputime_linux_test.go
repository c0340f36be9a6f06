package vad_test

import (
	"runtime"
	"syscall"
	"testing"
	"time"
)

// threadCPU returns the calling thread's CPU time (user + system).
func threadCPU() time.Duration {
	var ru syscall.Rusage
	const rusageThread = 1 // RUSAGE_THREAD
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// cpuPerOp runs loop on one locked OS thread and reports the thread's CPU
// time per iteration as "cpu-ns/op" beside the wall-clock ns/op: on the
// shared 2-core machine, wall time includes waiting for a CPU, CPU time
// does not.
func cpuPerOp(b *testing.B, loop func()) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	start := threadCPU()
	n := 0
	for b.Loop() {
		loop()
		n++
	}
	b.ReportMetric(float64(threadCPU()-start)/float64(max(n, 1)), "cpu-ns/op")
}
