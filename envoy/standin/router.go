package standin

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"strings"
	"time"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
)

// forward runs the router: a direct response, or the upstream call.
func (x *exchange) forward() error {
	r := x.route
	switch {
	case r == nil:
		return &localReply{status: http.StatusNotFound, details: "route_not_found", flags: []string{"NR"}}
	case r.GetDirectResponse() != nil:
		x.entry.Route = r.GetName()
		return directResponse(r)
	}
	x.entry.Route, x.entry.Cluster = r.GetName(), r.GetRoute().GetCluster()
	if x.upgrade != "" {
		return x.unimplemented("upgrade tunnel") // the gateway answers upgrades itself
	}
	return x.routeUpstream(r)
}

// routeRun is the router's state for one request (router.cc, Filter).
type routeRun struct {
	r   *routev3.Route
	ra  *routev3.RouteAction
	c   *cluster
	t   routeTimeouts
	ctx context.Context // ends every attempt: interrupts, the end of the request
	rs  *retryState     // nil: no retries
	// sent stops request_timeout once a whole request went upstream.
	sent *once
}

// routeUpstream is the router from decodeHeaders on: the route's
// timeouts, the retry state and the header edits on the request's one
// header map, then attempts (host choice, upstream filters, the upstream
// call) until one gives a response to hand downstream or the router gives
// up with a local reply (router.cc: decodeHeaders, onUpstreamHeaders,
// onUpstreamReset, onPerTryTimeout, doRetry).
func (x *exchange) routeUpstream(r *routev3.Route) error {
	ra := r.GetRoute()
	c := x.p.plan.clusters[ra.GetCluster()]
	if !c.acquire() { // the circuit breakers (conn_pool_base.cc, newStreamImpl)
		return resetBeforeHeaders(http.StatusServiceUnavailable, "overflow", "", "UO", false)
	}
	x.onFinish(c.release)
	rt := &routeRun{r: r, ra: ra, c: c}
	rt.t = x.finalTimeout(ra)
	rt.rs = x.newRetryState(x.p.plan.retryPolicies[r], c)
	if rt.rs != nil && int64(len(x.body)) > x.p.plan.bufferLimit {
		rt.rs = nil // over the retry buffer: retry_or_shadow_abandoned
	}
	x.onFinish(func() { rt.rs.release() })
	x.finalizeHeaders(r, rt.t)
	ctx, cancel := context.WithCancel(x.ctx)
	rt.ctx = ctx
	x.upCancel = cancel
	x.onFinish(cancel)
	x.intr.setUpstream(cancel)
	x.timers.startRoute(rt.t.route)
	rt.sent = &once{f: x.timers.disarmRequest}
	for n := 1; ; n++ {
		var lbc lbContext
		if rt.rs != nil {
			lbc = rt.rs
		}
		h := c.lb.choose(lbc)
		if h == nil {
			return noHealthyUpstream()
		}
		if rt.rs != nil {
			rt.rs.onHostAttempted(h)
		}
		x.entry.UpstreamHost, x.entry.Attempts = h.addr, n
		o := x.attempt(rt, h, n)
		if o.resp != nil {
			c.lb.report(h, resultHTTP, o.status)
			d, wait := retryNo, time.Duration(0)
			if rt.rs != nil {
				d, wait = rt.rs.shouldRetryHeaders(o.status, o.h)
			}
			if d == retryYes {
				o.resp.Body.Close()
				x.endAttempt(h, o)
				if err := x.backOff(wait); err != nil {
					return err
				}
				continue
			}
			x.noteRetry(d)
			x.onFinish(func() { h.active.Add(-1) })
			return x.deliver(o)
		}
		x.endAttempt(h, o)
		if o.err != nil { // a local reply, an interrupt or the client gone: never retried
			var lr *localReply
			if o.awaiting && errors.As(o.err, &lr) && lr.details == "response_timeout" {
				c.lb.report(h, resultTimeout, http.StatusGatewayTimeout) // onResponseTimeout
			}
			return o.err
		}
		if o.reset.kind == resetPerTry {
			c.lb.report(h, resultTimeout, http.StatusGatewayTimeout)
		} else {
			c.lb.report(h, resultConnectFailed, 0)
		}
		if rt.rs == nil {
			return o.reset.reply(false)
		}
		d, wait := rt.rs.shouldRetryReset(o.reset.kind, o.reset.started)
		if d == retryYes {
			if err := x.backOff(wait); err != nil {
				return err
			}
			continue
		}
		x.noteRetry(d)
		return o.reset.reply(rt.rs.retried)
	}
}

// noteRetry sets the flag of a retry refused by its limit (URX) or by the
// max_retries circuit breaker (UO).
func (x *exchange) noteRetry(d retryDecision) {
	switch d {
	case retryLimitExceeded:
		x.addFlags([]string{"URX"})
	case retryOverflow:
		x.addFlags([]string{"UO"})
	}
}

// endAttempt abandons an attempt: its stream, timers and filters go.
func (x *exchange) endAttempt(h *host, o attemptOutcome) {
	if o.abort != nil {
		o.abort(errAttemptEnded)
	}
	if o.up != nil {
		o.up.close()
	}
	x.timers.stopAttempt()
	h.active.Add(-1)
}

// backOff waits before a retry: Envoy's back-off, or what the test hook
// makes of it, on the Clock. Timers and the client can end the wait.
func (x *exchange) backOff(d time.Duration) error {
	if x.p.backOff != nil {
		d = x.p.backOff(d)
	}
	if d <= 0 {
		return x.intr.take()
	}
	select {
	case <-x.p.clock.After(d):
		return nil
	case <-x.intr.wait():
		return x.intr.take()
	case <-x.ctx.Done():
		return errAbort
	}
}

// finalTimeout is FilterUtility::finalTimeout: the route's timeouts, or
// x-envoy-upstream-rq-timeout-ms and x-envoy-upstream-rq-per-try-timeout-ms
// (consumed), a per-try timeout not below the route timeout ignored.
func (x *exchange) finalTimeout(ra *routev3.RouteAction) routeTimeouts {
	t := timeoutsOf(ra)
	for _, k := range []string{"x-envoy-upstream-rq-timeout-ms", "x-envoy-upstream-rq-per-try-timeout-ms"} {
		v, ok := x.headers.get(k)
		if !ok {
			continue
		}
		x.headers = x.headers.del(k)
		if n, err := strconv.ParseUint(v, 10, 63); err == nil {
			if k == "x-envoy-upstream-rq-timeout-ms" {
				t.route = time.Duration(n) * time.Millisecond
			} else {
				t.perTry = time.Duration(n) * time.Millisecond
			}
		}
	}
	if t.route > 0 && t.perTry >= t.route {
		t.perTry = 0
	}
	return t
}

// finalizeHeaders edits the request's header map as the router does
// before any attempt (finalizeRequestHeaders, setTimeoutHeaders): what
// every upstream filter and every attempt sees, and what the access log
// prints.
func (x *exchange) finalizeHeaders(r *routev3.Route, t routeTimeouts) {
	ra := r.GetRoute()
	for _, name := range r.GetRequestHeadersToRemove() {
		x.headers = x.headers.del(strings.ToLower(name))
	}
	if lit := ra.GetHostRewriteLiteral(); lit != "" {
		x.headers = x.headers.set(":authority", lit)
	}
	suppress := x.p.plan.suppressHdrs
	if p := ra.GetPrefixRewrite(); p != "" && r.GetMatch().GetPrefix() != "" {
		path, _ := x.headers.get(":path")
		if !suppress {
			x.headers = x.headers.set("x-envoy-original-path", path)
		}
		x.headers = x.headers.set(":path", p+strings.TrimPrefix(path, r.GetMatch().GetPrefix()))
	}
	if expected := cmpOr(t.perTry, t.route); expected > 0 && !suppress {
		x.headers = x.headers.set("x-envoy-expected-rq-timeout-ms", strconv.FormatInt(expected.Milliseconds(), 10))
	}
}

// attemptOutcome is how an attempt ended: response headers (after the
// upstream filters) for the router to decide on, a reset before them, or
// an error that ends the request.
type attemptOutcome struct {
	resp   *http.Response
	status int
	h      headerMap
	eos    bool
	start  time.Time

	reset *attemptReset
	err   error
	// awaiting: no response headers had arrived.
	awaiting bool

	abort context.CancelCauseFunc
	up    *upstreamProc
}

// attemptReset is a failure before the response headers.
type attemptReset struct {
	kind    resetKind
	started bool   // request bytes went upstream
	timeout string // details of a per-try timeout
	status  int
	reason  string
	// transport is the transport failure reason, flag the response flag.
	transport, flag string
}

func (r *attemptReset) reply(retried bool) *localReply {
	if r.kind == resetPerTry {
		return upstreamTimeout(r.timeout)
	}
	return resetBeforeHeaders(r.status, r.reason, r.transport, r.flag, retried)
}

// attempt is one UpstreamRequest: per-try timers, the upstream filters'
// request path on the shared headers and a fresh copy of the body,
// auto_host_rewrite, the call, and the upstream filters' response headers.
func (x *exchange) attempt(rt *routeRun, h *host, n int) attemptOutcome {
	ctx, abort := context.WithCancelCause(rt.ctx)
	x.onFinish(func() { abort(nil) })
	h.active.Add(1)
	x.timers.startAttempt(rt.t.perTry, rt.t.perTryIdle, abort)
	start := time.Now()
	var up *upstreamProc
	ended := func(err error, awaiting, started bool) attemptOutcome {
		o := x.attemptEnded(ctx, err, started)
		o.awaiting, o.abort, o.up = awaiting, abort, up
		return o
	}
	body := x.body
	if rt.c.upstream != nil {
		up = x.newUpstreamProc(rt.c, ctx, abort, &attemptInfo{h: h, n: n, cluster: rt.c.name, route: rt.r.GetName(), marker: x.p.marker})
		var err error
		if body, err = up.request(body); err != nil {
			return ended(err, true, false)
		}
	}
	// auto_host_rewrite is applied when the connection is ready
	// (UpstreamRequest::onPoolReady), to the shared map.
	if rt.ra.GetAutoHostRewrite().GetValue() && h.hostname != "" {
		x.headers = x.headers.set(":authority", h.hostname)
	}
	resp, started, err := x.send(ctx, rt, h, body)
	if err != nil {
		return ended(err, true, started)
	}
	x.timers.upstreamActivity() // response headers re-arm per_try_idle_timeout
	hm := headerMap{}
	for name, values := range resp.Header {
		for _, v := range values {
			hm = append(hm, header{strings.ToLower(name), v})
		}
	}
	if resp.ContentLength >= 0 {
		hm = hm.set("content-length", strconv.FormatInt(resp.ContentLength, 10))
	}
	eos := resp.ContentLength == 0 || x.r.Method == http.MethodHead ||
		resp.StatusCode == http.StatusNoContent || resp.StatusCode == http.StatusNotModified
	status := resp.StatusCode
	if up != nil {
		if status, hm, err = up.responseHeaders(status, hm, eos); err != nil {
			resp.Body.Close()
			return ended(err, false, true)
		}
	}
	return attemptOutcome{resp: resp, status: status, h: hm, eos: eos, start: start, abort: abort, up: up}
}

// attemptEnded says why an attempt ended before a response: its cancel
// cause (a per-try timeout, an upstream filter's local reply), an
// interrupt, the client gone, a local reply of the filters, or the upstream
// call failing.
func (x *exchange) attemptEnded(ctx context.Context, err error, started bool) attemptOutcome {
	if ctx.Err() != nil {
		cause := context.Cause(ctx)
		var lr *localReply
		switch {
		case errors.As(cause, &lr):
			return attemptOutcome{err: lr}
		case errors.Is(cause, errPerTryTimeout), errors.Is(cause, errPerTryIdleTimeout):
			return attemptOutcome{reset: &attemptReset{kind: resetPerTry, started: started, timeout: cause.Error()}}
		}
	}
	if c := x.intr.take(); c != nil {
		return attemptOutcome{err: c}
	}
	if x.ctx.Err() != nil || errors.Is(err, errAttemptEnded) {
		return attemptOutcome{err: errAbort}
	}
	var lr *localReply
	if errors.As(err, &lr) {
		return attemptOutcome{err: lr}
	}
	reset, final := upstreamFailure(err, started)
	if final != nil {
		return attemptOutcome{err: final}
	}
	return attemptOutcome{reset: reset}
}

// send makes the upstream call with the shared headers and the attempt's
// body; started reports that request headers went out.
func (x *exchange) send(ctx context.Context, rt *routeRun, h *host, body []byte) (*http.Response, bool, error) {
	method, _ := x.headers.get(":method")
	path, _ := x.headers.get(":path")
	authority, _ := x.headers.get(":authority")
	scheme := "http"
	if h.tls != nil {
		scheme = "https"
	}
	rd, length, closeConn := x.upstreamBody(ctx, body, rt.sent.run)
	var started once
	started.f = func() {}
	trace := &httptrace.ClientTrace{
		GotConn:      func(httptrace.GotConnInfo) { rt.c.lb.report(h, resultConnectSuccess, 0) },
		WroteHeaders: started.run,
		WroteRequest: func(httptrace.WroteRequestInfo) { rt.sent.run() },
	}
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(ctx, trace), method, scheme+"://"+authority+path, rd)
	if err != nil {
		return nil, false, &localReply{status: http.StatusBadRequest, details: "invalid_request"}
	}
	req.Host, req.ContentLength, req.Close = authority, length, closeConn
	if length == 0 {
		req.Body = nil
	}
	for _, e := range x.headers {
		if !strings.HasPrefix(e.key, ":") && e.key != "content-length" {
			req.Header.Add(e.key, e.value)
		}
	}
	resp, err := h.transport.RoundTrip(req)
	return resp, started.done.Load(), err
}

// deliver hands the final attempt's response to the downstream filters:
// from now on no retry, and per_try_timeout is ignored.
func (x *exchange) deliver(o attemptOutcome) error {
	defer o.resp.Body.Close()
	h := o.h
	if !x.p.plan.suppressHdrs {
		h = h.set("x-envoy-upstream-service-time", strconv.FormatInt(time.Since(o.start).Milliseconds(), 10))
	}
	x.timers.upstreamHeaders()
	if o.eos {
		x.timers.upstreamComplete()
	}
	return x.respond(o.status, h, upstreamResponseBody{o.resp.Body, x.timers}, o.eos)
}
