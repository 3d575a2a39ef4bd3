package standin

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// errInterrupted is what a wait returns when something from outside the
// request's goroutine ended it: a timer, or an ext_proc message that
// arrived while nothing was pending.
var errInterrupted = errors.New("interrupted")

// interrupts hands such events to the request's goroutine. The first cause
// wins until the request takes it; firing also cancels the upstream call,
// so every wait notices.
type interrupts struct {
	mu             sync.Mutex
	cause          error
	fired          chan struct{}
	cancelUpstream context.CancelFunc
	over           bool
}

func newInterrupts() *interrupts { return &interrupts{fired: make(chan struct{})} }

func (i *interrupts) fire(cause error) {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.over || i.cause != nil {
		return
	}
	i.cause = cause
	close(i.fired)
	if i.cancelUpstream != nil {
		i.cancelUpstream()
	}
}

// wait is closed when a cause is pending.
func (i *interrupts) wait() <-chan struct{} {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.fired
}

// take returns the pending cause, if any, and clears it.
func (i *interrupts) take() error {
	i.mu.Lock()
	defer i.mu.Unlock()
	c := i.cause
	if c != nil {
		i.cause, i.fired = nil, make(chan struct{})
	}
	return c
}

// setUpstream registers the upstream call's cancel; a pending cause
// cancels it at once.
func (i *interrupts) setUpstream(cancel context.CancelFunc) {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.cancelUpstream = cancel
	if i.cause != nil {
		cancel()
	}
}

// end ignores everything that fires after the request ended.
func (i *interrupts) end() {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.over = true
}

// timers are the stream's timers: the connection manager's
// stream_idle_timeout and request_timeout (Envoy's conn_manager_impl.cc,
// onIdleTimeout and onRequestTimeout) and the router's route timeout,
// per_try_timeout and per_try_idle_timeout (router.cc and
// upstream_request.cc).
type timers struct {
	x  *exchange
	mu sync.Mutex

	idle, request, route, perTry, perTryIdle Timer
	idleD, perTryIdleD                       time.Duration
	upstreamStarted                          bool // the response was handed downstream: per_try_timeout no longer applies
	attempt                                  int  // counts startAttempt calls
	done                                     bool
}

func (t *timers) fire(lr func() *localReply) func() {
	return func() { t.x.intr.fire(lr()) }
}

// start arms the connection manager's timers when the request starts.
func (t *timers) start(idle, request time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if idle > 0 {
		t.idleD = idle
		t.idle = t.afterFunc(idle, t.fire(t.x.streamIdleReply))
	}
	if request > 0 {
		t.request = t.afterFunc(request, t.fire(t.x.requestTimeoutReply))
	}
}

// touch restarts the stream idle timer: Envoy's filter manager does so on
// every header and data event in either direction.
func (t *timers) touch() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.idle != nil && !t.done {
		t.idle.Reset(t.idleD)
	}
}

// disarmRequest stops request_timeout: the whole request went upstream, or
// the response started.
func (t *timers) disarmRequest() {
	t.mu.Lock()
	defer t.mu.Unlock()
	stopTimer(t.request)
}

// startRoute arms the route timeout when the router has the whole request.
func (t *timers) startRoute(d time.Duration) {
	if d <= 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.done {
		t.route = t.afterFunc(d, t.fire(func() *localReply {
			return upstreamTimeout("response_timeout")
		}))
	}
}

// errPerTryTimeout and errPerTryIdleTimeout end an attempt whose response
// was not handed downstream yet: the router resets it and may retry.
var (
	errPerTryTimeout     = errors.New("upstream_per_try_timeout")
	errPerTryIdleTimeout = errors.New("upstream_per_try_idle_timeout")
)

// startAttempt arms an attempt's per-try timers, replacing the previous
// attempt's. Envoy starts them once the router has the whole request and
// the attempt's connection pool is ready (upstream_request.cc,
// onPoolReady, setupPerTryTimeout): with a pooled connection that is when
// the attempt starts, before the upstream filters run, which the stand-in
// always assumes. Until the response is handed downstream either timer
// resets the attempt (abort); after that per_try_timeout is ignored
// (onPerTryTimeout) and per_try_idle_timeout, re-armed by every response
// byte, cuts the response.
func (t *timers) startAttempt(perTry, perTryIdle time.Duration, abort func(error)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	stopTimer(t.perTry)
	stopTimer(t.perTryIdle)
	t.perTry, t.perTryIdle, t.upstreamStarted = nil, nil, false
	t.attempt++
	if t.done {
		return
	}
	gen := t.attempt
	// state is whether the response went downstream, and whether this is
	// still the current attempt.
	state := func() (started, current bool) {
		t.mu.Lock()
		defer t.mu.Unlock()
		return t.upstreamStarted, t.attempt == gen
	}
	if perTry > 0 {
		t.perTry = t.afterFunc(perTry, func() {
			if started, _ := state(); !started {
				abort(errPerTryTimeout)
			}
		})
	}
	if perTryIdle > 0 {
		t.perTryIdleD = perTryIdle
		t.perTryIdle = t.afterFunc(perTryIdle, func() {
			started, current := state()
			switch {
			case !current:
				abort(errPerTryIdleTimeout)
			case started:
				t.x.intr.fire(upstreamTimeout("upstream_per_try_idle_timeout"))
			default:
				abort(errPerTryIdleTimeout)
			}
		})
	}
}

// stopAttempt stops an abandoned attempt's per-try timers.
func (t *timers) stopAttempt() {
	t.mu.Lock()
	defer t.mu.Unlock()
	stopTimer(t.perTry)
	stopTimer(t.perTryIdle)
	t.perTry, t.perTryIdle = nil, nil
}

// upstreamHeaders: the router handed the response headers to the
// downstream filters (downstream_response_started_), even if a filter
// there holds them: no retry and no per_try_timeout from now on.
func (t *timers) upstreamHeaders() {
	t.mu.Lock()
	t.upstreamStarted = true
	stopTimer(t.perTry)
	t.mu.Unlock()
	t.upstreamActivity()
}

// upstreamActivity restarts per_try_idle_timeout (every response byte)
// and the stream idle timer.
func (t *timers) upstreamActivity() {
	t.mu.Lock()
	if t.perTryIdle != nil && !t.done {
		t.perTryIdle.Reset(t.perTryIdleD)
	}
	t.mu.Unlock()
	t.touch()
}

// upstreamComplete stops the router's timers once the response ended.
func (t *timers) upstreamComplete() { t.stopRouter() }

func (t *timers) stopRouter() {
	t.mu.Lock()
	defer t.mu.Unlock()
	stopTimer(t.route)
	stopTimer(t.perTry)
	stopTimer(t.perTryIdle)
	t.route, t.perTry, t.perTryIdle = nil, nil, nil
}

func (t *timers) stopAll() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.done = true
	for _, tm := range []Timer{t.idle, t.request, t.route, t.perTry, t.perTryIdle} {
		stopTimer(tm)
	}
}

func stopTimer(t Timer) {
	if t != nil {
		t.Stop()
	}
}

func (t *timers) afterFunc(d time.Duration, f func()) Timer { return afterFunc(t.x.p.clock, d, f) }

// upstreamTimeout is the router's reply to its timeouts (router.cc,
// onUpstreamTimeoutAbort).
func upstreamTimeout(details string) *localReply {
	return &localReply{status: http.StatusGatewayTimeout, body: "upstream request timeout", details: details, flags: []string{"UT"}}
}

// streamIdleReply is onIdleTimeout's local reply: 504 once the whole
// request was received (maybeRequestTimeoutCode), 408 before.
func (x *exchange) streamIdleReply() *localReply {
	return &localReply{status: x.timeoutCode(), body: "stream timeout", details: "stream_idle_timeout", flags: []string{"SI"}}
}

// requestTimeoutReply is onRequestTimeout's local reply.
func (x *exchange) requestTimeoutReply() *localReply {
	return &localReply{status: x.timeoutCode(), body: "request timeout", details: "request_overall_timeout"}
}

func (x *exchange) timeoutCode() int {
	if x.received.Load() {
		return http.StatusGatewayTimeout
	}
	return http.StatusRequestTimeout
}

// once is a func that runs at most once.
type once struct {
	done atomic.Bool
	f    func()
}

func (o *once) run() {
	if o.f != nil && o.done.CompareAndSwap(false, true) {
		o.f()
	}
}
