//go:build race

package bedrock

// raceEnabled reports the race detector, which adds allocations of its own.
const raceEnabled = true
