//go:build !race

package anthropic

// raceEnabled reports the race detector, which adds allocations of its own.
const raceEnabled = false
