package standin

import (
	"math/rand/v2"
	"time"
)

// Clock is the time source of outlier detection (ejection times, interval
// sweeps) and of retry back-off waits. Tests inject one with WithClock;
// the stream timers (timers.go) keep running on real time.
type Clock interface {
	Now() time.Time
	// After is time.After: the channel gets a value once d has passed.
	After(d time.Duration) <-chan time.Time
}

type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// WithClock replaces the clock of outlier detection and retry back-off.
// Outlier detection's interval sweeps run at New's time plus whole
// intervals, as Envoy's interval timer does from cluster creation; the
// stand-in runs the sweeps that are due whenever it looks at a cluster, so
// a test clock needs no timers of its own.
func WithClock(c Clock) Option { return func(p *Proxy) { p.clock = c } }

// WithRandom replaces the random numbers of load balancing (priority
// choice, least-request sampling, round-robin start), outlier detection
// (enforcing percentages, ejection jitter) and retry back-off jitter, as
// Envoy's Random::RandomGenerator. A constant 0 makes the exponential
// back-off 0 and a rate-limited back-off exactly its interval.
func WithRandom(r func() uint64) Option { return func(p *Proxy) { p.random = r } }

// WithBackOff sees every retry back-off Envoy's formula computed (the
// argument) and returns how long the stand-in waits instead: a test hook
// to make back-offs zero or to record them. The wait runs on the Clock.
func WithBackOff(f func(time.Duration) time.Duration) Option { return func(p *Proxy) { p.backOff = f } }

func defaultRandom() uint64 { return rand.Uint64() }
