//go:build !race

package flite

const raceEnabled = false
