//go:build unix

package saturation

import (
	"syscall"
	"time"
)

// processCPU is the user and system CPU time of every thread of the
// process so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
