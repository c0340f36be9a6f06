//go:build race

package retrieval

// The race detector slows the transpiled SQLite down some fifty times.
const raceEnabled = true
