//go:build !linux

package saturation

import "time"

// processWait is unknown here: only the CPU the process used counts
// towards its being busy.
func processWait() time.Duration { return 0 }
