//go:build !unix

package saturation

import "time"

// processCPU is unknown here: the process never counts as busy, so it
// never sheds.
func processCPU() time.Duration { return 0 }
