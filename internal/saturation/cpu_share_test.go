package saturation

import (
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestBusyIsShareOfUsableCPUs: the busy share is of the CPUs the process
// may run on (GOMAXPROCS: a container's CPU limit, or what the operator
// set), not of every CPU of the machine, and follows GOMAXPROCS when it
// changes. Counted against the machine, a voiced limited to 2 CPUs of a
// 16-CPU node could never reach MinBusy (2/16 < 0.5), so its own load
// never counted and it shed only past StarvedThreshold, four times
// -shed.threshold.
func TestBusyIsShareOfUsableCPUs(t *testing.T) {
	cpus := runtime.NumCPU()
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, tc := range []struct {
		name       string
		gomaxprocs int
		want       int
	}{
		{"one CPU of the machine's", 1, 1},
		{"all of them", cpus, cpus},
		{"more procs than CPUs", 2 * cpus, cpus},
	} {
		t.Run(tc.name, func(t *testing.T) {
			runtime.GOMAXPROCS(tc.gomaxprocs)
			require.Equal(t, tc.want, usableCPUs())
		})
	}
}
