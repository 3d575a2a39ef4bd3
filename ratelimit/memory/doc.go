// Package memory is the in-process ratelimit.Limiter: for one replica, for
// `modelgate dev` and for tests. All state sits behind one mutex, so an
// admission over several rules is atomic. Drained counters and expired
// leases are swept as operations go by (no background goroutine), keeping
// memory proportional to the subjects with live usage. Time is measured on
// Go's monotonic clock, so wall-clock steps neither refill nor freeze
// counters.
package memory
