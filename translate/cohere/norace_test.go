//go:build !race

package cohere

// raceEnabled reports the race detector, which adds allocations of its own.
const raceEnabled = false
