//go:build race

package responses

// raceEnabled reports the race detector, which adds allocations of its own.
const raceEnabled = true
