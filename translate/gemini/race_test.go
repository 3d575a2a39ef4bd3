//go:build race

package gemini

// raceEnabled reports the race detector, which adds allocations of its own.
const raceEnabled = true
