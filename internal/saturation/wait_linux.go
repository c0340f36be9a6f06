//go:build linux

package saturation

import (
	"bytes"
	"os"
	"strconv"
	"time"
)

// processWait is how long the process's live threads have waited on a
// run queue for a CPU so far (the second field of each thread's
// /proc/self/task/*/schedstat); 0 where the kernel does not say.
func processWait() time.Duration {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return 0
	}
	var total time.Duration
	for _, t := range tasks {
		b, err := os.ReadFile("/proc/self/task/" + t.Name() + "/schedstat")
		if err != nil {
			continue // the thread has exited
		}
		total += parseSchedstatWait(b)
	}
	return total
}

// parseSchedstatWait reads the run-queue wait, in nanoseconds, from a
// schedstat line ("<on cpu ns> <waiting ns> <timeslices>"); 0 if it
// cannot.
func parseSchedstatWait(b []byte) time.Duration {
	f := bytes.Fields(b)
	if len(f) < 2 {
		return 0
	}
	ns, err := strconv.ParseInt(string(f[1]), 10, 64)
	if err != nil || ns < 0 {
		return 0
	}
	return time.Duration(ns)
}
