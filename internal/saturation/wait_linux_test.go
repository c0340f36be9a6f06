//go:build linux

package saturation

import (
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestParseSchedstatWait(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
	}{
		{"169856173 547806714 440\n", 547806714},
		{"0 0 0", 0},
		{"12", 0},
		{"", 0},
		{"1 x 2", 0},
		{"1 -5 2", 0},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, parseSchedstatWait([]byte(tt.in)), "%q", tt.in)
	}
}

// TestProcessWaitReadsThreads: the kernel reports this process's threads'
// wait; every wake-up of a thread that slept adds some.
func TestProcessWaitReadsThreads(t *testing.T) {
	if _, err := os.Stat("/proc/self/schedstat"); err != nil {
		t.Skip("the kernel has no schedstat:", err)
	}
	for range 5 {
		time.Sleep(time.Millisecond)
	}
	require.Positive(t, processWait())
}
