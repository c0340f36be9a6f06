//go:build race

package session

const raceOn = true
