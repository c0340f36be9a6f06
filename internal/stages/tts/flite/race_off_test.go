//go:build !race && cgo && !noflite && !nosphinx

package flite

const raceEnabled = false
