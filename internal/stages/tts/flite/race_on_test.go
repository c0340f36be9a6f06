//go:build race && cgo && !noflite && !nosphinx

package flite

// The race detector slows the recogniser of the round trip some ten times.
const raceEnabled = true
