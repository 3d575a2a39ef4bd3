//go:build !race

package openai

// raceEnabled reports the race detector, which adds allocations of its own.
const raceEnabled = false
