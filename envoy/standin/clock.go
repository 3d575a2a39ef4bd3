package standin

import (
	"math/rand/v2"
	"time"
)

// Clock is the time source of outlier detection (ejection times, interval
// sweeps) and of retry back-off waits. Tests inject one with WithClock.
// The stream timers (timers.go) run on it too when it is a TimerClock,
// else on real time.
type Clock interface {
	Now() time.Time
	// After is time.After: the channel gets a value once d has passed.
	After(d time.Duration) <-chan time.Time
}

// TimerClock is a Clock that also runs the stream timers: the connection
// manager's stream_idle_timeout and request_timeout, the route timeout,
// per_try_timeout and per_try_idle_timeout. A test that moves it can let
// hours of a slow provider pass in no time.
type TimerClock interface {
	Clock
	// AfterFunc is time.AfterFunc: f runs in its own goroutine once d
	// has passed, unless the timer was stopped.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a timer of a TimerClock, as *time.Timer.
type Timer interface {
	Stop() bool
	Reset(d time.Duration) bool
}

type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// afterFunc runs the stream timers on c when it can, else on real time.
func afterFunc(c Clock, d time.Duration, f func()) Timer {
	if tc, ok := c.(TimerClock); ok {
		return tc.AfterFunc(d, f)
	}
	return time.AfterFunc(d, f)
}

// WithClock replaces the clock of outlier detection and retry back-off,
// and of the stream timers when c is a TimerClock.
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
