//go:build race

package intent

// The race detector slows training down some ten times.
const raceEnabled = true
