package standin

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	upstreamsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

func twoDeployments(p0, p1 *upstreamRecorder) []deployment {
	return []deployment{{priority: 0, backend: "b0", up: p0}, {priority: 1, backend: "b1", up: p1}}
}

// The contract's topology loads as it is (upstream_impl.cc ClusterInfoImpl
// for the upstream chain; route_components.proto for the route).
func TestFallbackConfigAccepted(t *testing.T) {
	e := startFallback(t, fallback{deployments: twoDeployments(&upstreamRecorder{}, &upstreamRecorder{})})
	c := e.proxy.plan.clusters[fbCluster]
	if len(c.lb.priorities) != 2 || c.lb.policy != leastRequest || c.lb.panicThreshold != 0 || c.upstream == nil || c.lb.od == nil {
		t.Errorf("cluster compiled as %+v", c)
	}
	if rp := e.proxy.plan.retryPolicies[e.proxy.plan.routes.GetVirtualHosts()[0].GetRoutes()[0]]; rp == nil ||
		rp.numRetries != 2 || rp.previousPriorities != 1 || !rp.previousHosts || rp.hostSelectionMaxAttempts != 3 {
		t.Errorf("retry policy compiled as %+v", rp)
	}
}

// Refusals for the upstream chain and the cluster (upstream_impl.cc
// ClusterInfoImpl: the codec must be the last upstream filter; Envoy's
// LOGICAL_DNS takes a single endpoint; outlier_detection_impl.cc: no
// max_ejection_time below base_ejection_time).
func TestFallbackConfigRefused(t *testing.T) {
	filters := func(c *clusterv3.Cluster, edit func([]*hcmv3.HttpFilter) []*hcmv3.HttpFilter) {
		o := &upstreamsv3.HttpProtocolOptions{}
		if err := c.TypedExtensionProtocolOptions[httpProtocolOptionsKey].UnmarshalTo(o); err != nil {
			t.Fatal(err)
		}
		o.HttpFilters = edit(o.HttpFilters)
		c.TypedExtensionProtocolOptions[httpProtocolOptionsKey] = mustAny(t, o)
	}
	for name, edit := range map[string]func(*clusterv3.Cluster){
		"codec not last": func(c *clusterv3.Cluster) {
			filters(c, func(fs []*hcmv3.HttpFilter) []*hcmv3.HttpFilter { return fs[:1] })
		},
		"codec twice": func(c *clusterv3.Cluster) {
			filters(c, func(fs []*hcmv3.HttpFilter) []*hcmv3.HttpFilter { return []*hcmv3.HttpFilter{fs[1], fs[0], fs[1]} })
		},
		"an upstream filter other than ext_proc": func(c *clusterv3.Cluster) {
			filters(c, func(fs []*hcmv3.HttpFilter) []*hcmv3.HttpFilter {
				fs[0] = &hcmv3.HttpFilter{Name: "envoy.filters.http.router", ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAny(t, &routerv3.Router{})}}
				return fs
			})
		},
		"LOGICAL_DNS with two endpoints": func(c *clusterv3.Cluster) {
			c.ClusterDiscoveryType = &clusterv3.Cluster_Type{Type: clusterv3.Cluster_LOGICAL_DNS}
		},
		"RANDOM load balancing": func(c *clusterv3.Cluster) { c.LbPolicy = clusterv3.Cluster_RANDOM },
		"max_ejection_time below base_ejection_time": func(c *clusterv3.Cluster) {
			c.OutlierDetection.MaxEjectionTime = durationpb.New(time.Second)
		},
		"endpoint health status": func(c *clusterv3.Cluster) {
			c.LoadAssignment.Endpoints[0].LbEndpoints[0].HealthStatus = corev3.HealthStatus_DRAINING
		},
	} {
		t.Run(name, func(t *testing.T) {
			if err := fallbackError(t, fallback{deployments: twoDeployments(nil, nil), cluster: edit}); err == nil {
				t.Error("New accepted it")
			}
		})
	}
	for name, edit := range map[string]func(*filterv3.ExternalProcessor){
		"unknown attribute": func(ep *filterv3.ExternalProcessor) {
			ep.RequestAttributes = append(ep.RequestAttributes, "request.path")
		},
		"response body in upstream": func(ep *filterv3.ExternalProcessor) {
			ep.ProcessingMode.ResponseBodyMode = filterv3.ProcessingMode_BUFFERED
		},
		"mode override in upstream": func(ep *filterv3.ExternalProcessor) { ep.AllowModeOverride = true },
	} {
		t.Run(name, func(t *testing.T) {
			if err := fallbackError(t, fallback{deployments: twoDeployments(nil, nil), editUp: edit}); err == nil || !strings.Contains(err.Error(), "unsupported") {
				t.Errorf("New error %v", err)
			}
		})
	}
}

// Connect failure on P0: retried under connect-failure, and
// previous_priorities moves the retry to P1 (router.cc onUpstreamReset,
// retry_state_impl.cc wouldRetryFromReset, previous_priorities.cc). The
// failure counts as a 503 gateway failure for outlier detection
// (outlier_detection_impl.cc, putResultNoLocalExternalSplit): with
// consecutive_gateway_failure 1 P0 is ejected and the next request goes to
// P1 at once. auto_host_rewrite sets the endpoint's hostname (router.cc,
// UpstreamRequest::onPoolReady).
func TestFallbackConnectFailureNextPriority(t *testing.T) {
	p1 := &upstreamRecorder{}
	e := startFallback(t, fallback{
		deployments: []deployment{{priority: 0, backend: "b0", addr: closedAddr(t)}, {priority: 1, backend: "b1", up: p1}},
		outlier: &clusterv3.OutlierDetection{ConsecutiveGatewayFailure: wrapperspb.UInt32(1), EnforcingConsecutiveGatewayFailure: wrapperspb.UInt32(100),
			Interval: durationpb.New(time.Second), BaseEjectionTime: durationpb.New(30 * time.Second), MaxEjectionPercent: wrapperspb.UInt32(100)},
	}, WithRandom(zeroRandom), WithBackOff(func(time.Duration) time.Duration { return 0 }))
	r := e.post(t)
	en := e.entry(t)
	if r.status != 200 || r.body != "hello from upstream" || en.Attempts != 2 || en.UpstreamHost != p1.hostAddr(t) || en.Flags != "" {
		t.Fatalf("response %d %q; attempts %d host %q flags %q", r.status, r.body, en.Attempts, en.UpstreamHost, en.Flags)
	}
	if got := p1.reqs[0].Host; got != "b1.example" {
		t.Errorf("upstream Host %q, want the endpoint hostname (auto_host_rewrite)", got)
	}
	if r.header.Get("X-Modelgate-Deployment") != "seen" {
		t.Errorf("response headers %v: the upstream filter's response mutation is missing", r.header)
	}
	r = e.post(t)
	if en := e.entry(t); r.status != 200 || en.Attempts != 1 || len(p1.reqs) != 2 {
		t.Errorf("second request: %d, attempts %d; P0 is ejected and P1 serves at once", r.status, en.Attempts)
	}
}

// A 503 from P0 is retried under 5xx; previous_priorities (update_frequency
// 1) sends the retry to P1 although P0 was not ejected (previous_priorities.cc,
// determinePriorityLoad). Without it, P0 still takes all the load
// (load_balancer_impl.cc, recalculatePerPriorityState) and the retry
// returns to P0.
func TestFallback503RetriedOnNextPriority(t *testing.T) {
	t.Run("previous_priorities", func(t *testing.T) {
		p0, p1 := answering(503), &upstreamRecorder{}
		e := startFallback(t, fallback{deployments: twoDeployments(p0, p1)}, WithRandom(zeroRandom), WithBackOff(func(time.Duration) time.Duration { return 0 }))
		r := e.post(t)
		en := e.entry(t)
		if r.status != 200 || p0.count() != 1 || p1.count() != 1 || en.Attempts != 2 {
			t.Errorf("response %d; P0 %d calls, P1 %d; attempts %d", r.status, p0.count(), p1.count(), en.Attempts)
		}
		if s := responseStatuses(e.router); len(s) != 1 || s[0] != "200" {
			t.Errorf("router-level filter saw response statuses %v; it sees the final attempt only", s)
		}
	})
	t.Run("without a retry priority the retry stays on P0", func(t *testing.T) {
		p0, p1 := answering(503), &upstreamRecorder{}
		rp := contractRetry(t)
		rp.RetryPriority, rp.RetryHostPredicate = nil, nil
		e := startFallback(t, fallback{deployments: twoDeployments(p0, p1), retry: rp}, WithRandom(zeroRandom), WithBackOff(func(time.Duration) time.Duration { return 0 }))
		r := e.post(t)
		en := e.entry(t)
		if r.status != 503 || p0.count() != 3 || p1.count() != 0 || en.Flags != "URX" {
			t.Errorf("response %d; P0 %d calls, P1 %d; flags %q: want P0's 503 after 2 retries, URX", r.status, p0.count(), p1.count(), en.Flags)
		}
	})
}

// A retried 429 waits the Retry-After interval: rate_limited_retry_back_off
// with reset_headers retry-after SECONDS, jittered in [2s, 3s)
// (retry_state_impl.cc shouldRetryHeaders and parseResetInterval;
// backoff_strategy.cc JitteredLowerBoundBackOffStrategy). Over
// max_interval, Envoy's exponential back-off applies (25ms base, full
// jitter). The wait runs on the injected clock.
func TestFallback429RetryAfter(t *testing.T) {
	clock := newFakeClock()
	p0, p1 := answering(429, "Retry-After", "2"), &upstreamRecorder{}
	e := startFallback(t, fallback{deployments: twoDeployments(p0, p1)}, WithClock(clock), WithRandom(zeroRandom))
	if r := e.post(t); r.status != 200 || p1.count() != 1 {
		t.Fatalf("response %d, P1 calls %d", r.status, p1.count())
	}
	e.entry(t)
	if w := clock.recorded(); len(w) != 1 || w[0] != 2*time.Second {
		t.Errorf("back-off waits %v, want exactly 2s (random 0 in [2s, 3s))", w)
	}
	t.Run("over max_interval: exponential back-off", func(t *testing.T) {
		var seen []time.Duration
		p0 := answering(429, "Retry-After", "60")
		e := startFallback(t, fallback{deployments: twoDeployments(p0, &upstreamRecorder{})}, WithBackOff(func(d time.Duration) time.Duration {
			seen = append(seen, d)
			return 0
		}))
		if r := e.post(t); r.status != 200 {
			t.Fatalf("response %d", r.status)
		}
		e.entry(t)
		if len(seen) != 1 || seen[0] < 0 || seen[0] >= 25*time.Millisecond {
			t.Errorf("back-off %v, want below the 25ms base interval", seen)
		}
	})
	t.Run("429 is not retried without retriable-status-codes", func(t *testing.T) {
		rp := contractRetry(t)
		rp.RetryOn = "connect-failure,reset,5xx"
		p0, p1 := answering(429, "Retry-After", "2"), &upstreamRecorder{}
		e := startFallback(t, fallback{deployments: twoDeployments(p0, p1), retry: rp})
		if r := e.post(t); r.status != 429 || p1.count() != 0 {
			t.Errorf("response %d, P1 calls %d", r.status, p1.count())
		}
		e.entry(t)
	})
}

// per_try_timeout resets the attempt and retries it (router.cc
// onPerTryTimeout → maybeRetryReset with a local reset: 5xx and reset
// retry it); the timeout counts as the router's 504 (LocalOriginTimeout).
func TestFallbackPerTryTimeoutRetried(t *testing.T) {
	rp := contractRetry(t)
	rp.PerTryTimeout = ms(150)
	p0, p1 := delayedUpstream(3*time.Second), &upstreamRecorder{}
	e := startFallback(t, fallback{deployments: twoDeployments(p0, p1), retry: rp}, WithBackOff(func(time.Duration) time.Duration { return 0 }))
	r := e.post(t)
	en := e.entry(t)
	if r.status != 200 || p1.count() != 1 || en.Attempts != 2 {
		t.Errorf("response %d %q; P1 %d calls; attempts %d", r.status, r.body, p1.count(), en.Attempts)
	}
	if m := e.proxy.plan.clusters[fbCluster].lb.priorities[0][0].om; m.c5xx != 1 || m.cGateway != 1 {
		t.Errorf("P0's counters after the timeout: 5xx %d, gateway %d; want 1 and 1", m.c5xx, m.cGateway)
	}
	t.Run("the last attempt's per-try timeout is the router's 504", func(t *testing.T) {
		rp := contractRetry(t)
		rp.PerTryTimeout, rp.NumRetries = ms(100), wrapperspb.UInt32(1)
		e := startFallback(t, fallback{deployments: twoDeployments(delayedUpstream(3*time.Second), delayedUpstream(3*time.Second)), retry: rp},
			WithBackOff(func(time.Duration) time.Duration { return 0 }))
		r := e.post(t)
		en := e.entry(t)
		if r.status != 504 || r.body != "upstream request timeout" || en.Details != "upstream_per_try_timeout" || en.Flags != "UT,URX" {
			t.Errorf("response %d %q, details %q flags %q", r.status, r.body, en.Details, en.Flags)
		}
	})
}

// Once response headers were handed downstream nothing is retried
// (router.cc onUpstreamHeaders sets downstream_response_started_;
// maybeRetryReset refuses): a body cut after a 200 resets the client's
// stream and P1 is never asked.
func TestFallbackNoRetryAfterResponseStarted(t *testing.T) {
	p0 := &upstreamRecorder{handler: func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "100")
		w.WriteHeader(200)
		io.WriteString(w, "partial")
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler)
	}}
	p1 := &upstreamRecorder{}
	e := startFallback(t, fallback{deployments: twoDeployments(p0, p1)}, WithBackOff(func(time.Duration) time.Duration { return 0 }))
	r := e.post(t)
	en := e.entry(t)
	if p1.count() != 0 || en.Attempts != 1 || r.status == 200 && r.err == nil {
		t.Errorf("client got %d %q err %v; P1 calls %d, attempts %d", r.status, r.body, r.err, p1.count(), en.Attempts)
	}
}

// Consecutive 5xx eject a host at the Nth error; it returns at the first
// interval sweep after base_ejection_time × times ejected, and the next
// ejection lasts twice as long (outlier_detection_impl.cc: putHttpResponseCode,
// ejectHost, checkHostForUneject, onIntervalTimer; docs outlier).
func TestFallbackEjectionAndReturn(t *testing.T) {
	clock := newFakeClock()
	p0, p1 := answering(500), &upstreamRecorder{}
	e := startFallback(t, fallback{
		deployments: twoDeployments(p0, p1),
		retry:       &routev3.RetryPolicy{NumRetries: wrapperspb.UInt32(0)},
		outlier: &clusterv3.OutlierDetection{Consecutive_5Xx: wrapperspb.UInt32(2), Interval: durationpb.New(time.Second),
			BaseEjectionTime: durationpb.New(10 * time.Second), MaxEjectionPercent: wrapperspb.UInt32(100)},
	}, WithClock(clock), WithRandom(zeroRandom))
	served := func() string {
		t.Helper()
		r := e.post(t)
		e.entry(t)
		if r.status == 500 {
			return "P0"
		}
		return "P1"
	}
	clock.advance(500 * time.Millisecond)
	if a, b, c := served(), served(), served(); a != "P0" || b != "P0" || c != "P1" {
		t.Fatalf("served by %s, %s, %s; want P0 twice (ejected at the 2nd 500), then P1", a, b, c)
	}
	clock.advance(10*time.Second + 100*time.Millisecond) // base_ejection_time passed at 10.5s, the next sweep is at 11s
	if s := served(); s != "P1" {
		t.Errorf("at 10.6s served by %s: the host returns at a sweep, not before", s)
	}
	clock.advance(400 * time.Millisecond) // 11s: the sweep returns it
	if a, b, c := served(), served(), served(); a != "P0" || b != "P0" || c != "P1" {
		t.Fatalf("after the sweep served by %s, %s, %s; want P0 until the second ejection", a, b, c)
	}
	clock.advance(19*time.Second + 500*time.Millisecond) // ejected at 11s for 2 × 10s: back at the 31s sweep
	if s := served(); s != "P1" {
		t.Errorf("at 30.5s served by %s: the second ejection lasts twice base_ejection_time", s)
	}
	clock.advance(500 * time.Millisecond)
	if s := served(); s != "P0" {
		t.Errorf("at 31s served by %s", s)
	}
}

// With healthy_panic_threshold 0 and every host ejected there is no host:
// 503 "no healthy upstream", no_healthy_upstream, UH
// (load_balancer_impl.cc recalculatePerPriorityPanic; router.cc
// sendNoHealthyUpstreamResponse). With the default threshold (50%), panic
// sends traffic to the ejected hosts instead (docs panic_threshold).
func TestFallbackPanicThreshold(t *testing.T) {
	od := &clusterv3.OutlierDetection{Consecutive_5Xx: wrapperspb.UInt32(1), Interval: durationpb.New(time.Second),
		BaseEjectionTime: durationpb.New(30 * time.Second), MaxEjectionPercent: wrapperspb.UInt32(100)}
	t.Run("0 disables panic", func(t *testing.T) {
		p0, p1 := answering(503), answering(503)
		e := startFallback(t, fallback{deployments: twoDeployments(p0, p1), outlier: od}, WithRandom(zeroRandom), WithBackOff(func(time.Duration) time.Duration { return 0 }))
		r := e.post(t) // P0 503 (ejected), P1 503 (ejected), then no host for the last retry
		en := e.entry(t)
		if r.status != 503 || r.body != "no healthy upstream" || en.Details != "no_healthy_upstream" || en.Flags != "UH" {
			t.Errorf("response %d %q, details %q flags %q", r.status, r.body, en.Details, en.Flags)
		}
		r = e.post(t)
		if en := e.entry(t); r.status != 503 || en.Flags != "UH" || p0.count()+p1.count() != 2 {
			t.Errorf("next request %d flags %q; upstream calls %d", r.status, en.Flags, p0.count()+p1.count())
		}
	})
	t.Run("the default threshold panics", func(t *testing.T) {
		p0, p1 := answering(503), answering(503)
		e := startFallback(t, fallback{deployments: twoDeployments(p0, p1), outlier: od, panic: &typev3.Percent{Value: 50},
			retry: &routev3.RetryPolicy{NumRetries: wrapperspb.UInt32(0)}}, WithRandom(zeroRandom))
		e.post(t)
		e.entry(t)
		e.post(t)
		e.entry(t)
		r := e.post(t)
		if en := e.entry(t); r.status != 503 || r.body == "no healthy upstream" || en.Flags != "" {
			t.Errorf("response %d %q flags %q: in panic the ejected hosts still get traffic", r.status, r.body, en.Flags)
		}
	})
}

// The upstream filters of every attempt work on the request's one header
// map (router.cc: each UpstreamRequest decodes parent_.downstreamHeaders();
// doRetry never restores it), so a server that forgets to reset :path or
// authorization on a later attempt sends the earlier attempt's values. The
// body is a fresh copy each time (Filter::doRetry).
func TestFallbackSharedHeaderMap(t *testing.T) {
	p0, p1 := answering(503), &upstreamRecorder{}
	e := startFallback(t, fallback{deployments: twoDeployments(p0, p1),
		upstream: func(n int, req *extprocv3.ProcessingRequest) *extprocv3.ProcessingResponse {
			switch {
			case n == 1 && req.GetRequestHeaders() != nil:
				return headersReply(&extprocv3.CommonResponse{HeaderMutation: &extprocv3.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{
					setHeader(":path", "/provider0/chat"), setHeader("authorization", "Bearer k0"), setHeader("x-p0-only", "1")}}})
			case n == 1 && req.GetRequestBody() != nil:
				return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestBody{RequestBody: &extprocv3.BodyResponse{
					Response: &extprocv3.CommonResponse{
						HeaderMutation: &extprocv3.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{setHeader("content-length", "9")}},
						BodyMutation:   &extprocv3.BodyMutation{Mutation: &extprocv3.BodyMutation_Body{Body: []byte("for-p0...")}}}}}}
			}
			return nil // attempt 2 forgets to reset what attempt 1 set
		}}, WithBackOff(func(time.Duration) time.Duration { return 0 }))
	if r := e.post(t); r.status != 200 {
		t.Fatalf("response %d %q", r.status, r.body)
	}
	e.entry(t)
	streams := e.up.all()
	if len(streams) != 2 {
		t.Fatalf("%d upstream ext_proc streams, want one per attempt", len(streams))
	}
	second := headerMapOf(streams[1][0].GetRequestHeaders())
	if second[":path"] != "/provider0/chat" || second["authorization"] != "Bearer k0" || second["x-p0-only"] != "1" {
		t.Errorf("attempt 2's request_headers %v: attempt 1's mutations must still be there", second)
	}
	if b := streams[1][1].GetRequestBody().GetBody(); string(b) != `{"model":"m"}` {
		t.Errorf("attempt 2's body %q, want a fresh copy of the router-level body", b)
	}
	got := p1.reqs[0]
	if got.URL.Path != "/provider0/chat" || got.Header.Get("Authorization") != "Bearer k0" || got.Header.Get("X-P0-Only") != "1" {
		t.Errorf("P1 got %s with %v: the forgotten headers go upstream", got.URL.Path, got.Header)
	}
	// Attempt 1's content-length stays too: attempt 2's untranslated body
	// goes out cut to it, as Envoy's codec sends the length it is given.
	if string(p0.bodies[0]) != "for-p0..." || string(p1.bodies[0]) != `{"model":` {
		t.Errorf("bodies: P0 %q, P1 %q", p0.bodies[0], p1.bodies[0])
	}
	if ends := e.up.waitEnds(2); len(ends) != 2 {
		t.Errorf("upstream stream ends %v: the retried attempt's stream must be closed", ends)
	}
}

func headerMapOf(h *extprocv3.HttpHeaders) map[string]string {
	out := map[string]string{}
	for _, e := range h.GetHeaders().GetHeaders() {
		out[e.GetKey()] = string(e.GetRawValue())
	}
	return out
}

// An upstream filter's immediate_response is a local reply of the
// downstream stream, never retried even with a retriable status, and the
// router-level ext_proc sees it (upstream_request.cc
// UpstreamFilterManager::sendLocalReply; http_protocol_options.proto "Local
// errors sent by upstream filters will not trigger retries"; 1.37+).
// Failures of the upstream ext_proc take the same path.
func TestFallbackUpstreamImmediateResponse(t *testing.T) {
	t.Run("immediate_response", func(t *testing.T) {
		p0, p1 := &upstreamRecorder{}, &upstreamRecorder{}
		e := startFallback(t, fallback{deployments: twoDeployments(p0, p1),
			upstream: func(n int, req *extprocv3.ProcessingRequest) *extprocv3.ProcessingResponse {
				if req.GetRequestHeaders() != nil {
					return immediateReply(&extprocv3.ImmediateResponse{Status: &typev3.HttpStatus{Code: 429}, Body: []byte("slow down"), Details: "quota"})
				}
				return nil
			}})
		r := e.post(t)
		en := e.entry(t)
		if r.status != 429 || r.body != "slow down" || en.Details != "quota" || p0.count()+p1.count() != 0 || len(e.up.all()) != 1 {
			t.Errorf("response %d %q details %q; upstream calls %d, upstream streams %d", r.status, r.body, en.Details, p0.count()+p1.count(), len(e.up.all()))
		}
		if s := responseStatuses(e.router); len(s) != 1 || s[0] != "429" {
			t.Errorf("router-level filter saw %v: an upstream filter's local reply goes through it", s)
		}
	})
	t.Run("a failing upstream filter: status_on_error, no retry", func(t *testing.T) {
		p0, p1 := &upstreamRecorder{}, &upstreamRecorder{}
		e := startFallback(t, fallback{deployments: twoDeployments(p0, p1),
			upstream: func(n int, req *extprocv3.ProcessingRequest) *extprocv3.ProcessingResponse {
				if req.GetRequestHeaders() != nil { // the wrong kind of reply: spurious
					return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseHeaders{ResponseHeaders: &extprocv3.HeadersResponse{}}}
				}
				return nil
			}})
		r := e.post(t)
		en := e.entry(t)
		if r.status != 500 || en.Details != "spurious_message" || p0.count()+p1.count() != 0 {
			t.Errorf("response %d, details %q, upstream calls %d", r.status, en.Details, p0.count()+p1.count())
		}
	})
}

// The upstream filter sees each attempt's response headers before the
// router decides (upstream_request.h: codec → upstream filters → router):
// the status it leaves is what retries and outlier detection use.
func TestFallbackUpstreamResponseStatusCounts(t *testing.T) {
	rewrite := func(from, to string) func(int, *extprocv3.ProcessingRequest) *extprocv3.ProcessingResponse {
		return func(n int, req *extprocv3.ProcessingRequest) *extprocv3.ProcessingResponse {
			if h := req.GetResponseHeaders(); h != nil && headerMapOf(h)[":status"] == from {
				return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseHeaders{ResponseHeaders: &extprocv3.HeadersResponse{
					Response: &extprocv3.CommonResponse{HeaderMutation: &extprocv3.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{setHeader(":status", to)}}}}}}
			}
			return nil
		}
	}
	t.Run("a provider's 529 made 503 is retried", func(t *testing.T) {
		p0, p1 := answering(529), &upstreamRecorder{}
		rp := contractRetry(t)
		rp.RetryOn = "gateway-error"
		e := startFallback(t, fallback{deployments: twoDeployments(p0, p1), retry: rp, upstream: rewrite("529", "503")},
			WithBackOff(func(time.Duration) time.Duration { return 0 }))
		if r := e.post(t); r.status != 200 || p1.count() != 1 {
			t.Errorf("response %d, P1 calls %d", r.status, p1.count())
		}
		e.entry(t)
	})
	t.Run("a 503 made 400 is final and not a 5xx", func(t *testing.T) {
		p0, p1 := answering(503), &upstreamRecorder{}
		e := startFallback(t, fallback{deployments: twoDeployments(p0, p1), upstream: rewrite("503", "400")})
		if r := e.post(t); r.status != 400 || p1.count() != 0 {
			t.Errorf("response %d, P1 calls %d", r.status, p1.count())
		}
		e.entry(t)
		if m := e.proxy.plan.clusters[fbCluster].lb.priorities[0][0].om; m.c5xx != 0 {
			t.Errorf("P0's 5xx counter %d: outlier detection counts the status after the upstream filters", m.c5xx)
		}
	})
}

// request_attributes are evaluated at the first message of each upstream
// stream: the chosen host's metadata and the attempt count
// (filters/common/expr/context.cc; ext_proc matching_utils.cc
// evaluateAttributes: numbers stay numbers, a message becomes its debug
// string, a path into it the value).
func TestFallbackAttributesPerAttempt(t *testing.T) {
	e := startFallback(t, fallback{deployments: twoDeployments(answering(503), &upstreamRecorder{})}, WithBackOff(func(time.Duration) time.Duration { return 0 }))
	if r := e.post(t); r.status != 200 {
		t.Fatalf("response %d", r.status)
	}
	e.entry(t)
	streams := e.up.all()
	if len(streams) != 2 {
		t.Fatalf("%d upstream streams", len(streams))
	}
	for i, s := range streams {
		attrs := s[0].GetAttributes()[attributesKey].GetFields()
		backend := []string{"b0", "b1"}[i]
		if n := attrs["upstream.request_attempt_count"].GetNumberValue(); n != float64(i+1) {
			t.Errorf("attempt %d: upstream.request_attempt_count %v", i+1, n)
		}
		if v := attrs[backendAttr].GetStringValue(); v != backend {
			t.Errorf("attempt %d: %s = %q, want %q", i+1, backendAttr, v, backend)
		}
		md := attrs["xds.upstream_host_metadata"].GetStringValue()
		want := `filter_metadata { key: "io.modelgate" value { fields { key: "backend" value { string_value: "` + backend + `" } } } }`
		if !strings.HasPrefix(md, "goo.gle/debug") || !strings.HasSuffix(md, " "+want) {
			t.Errorf("attempt %d: xds.upstream_host_metadata = %q, want a marked debug string ending in %q", i+1, md, want)
		}
		for _, m := range s[1:] {
			if m.GetAttributes() != nil {
				t.Errorf("attempt %d: attributes on a later message", i+1)
			}
		}
	}
}

// The retry buffer: a body over the limit drops the retry state
// (router.cc decodeData, retry_or_shadow_abandoned), so a 503 is final.
func TestFallbackRetryBufferLimit(t *testing.T) {
	p0, p1 := answering(503), &upstreamRecorder{}
	e := startFallback(t, fallback{deployments: twoDeployments(p0, p1), noUpstream: true})
	e.proxy.plan.bufferLimit = 8
	e.proxy.plan.extproc.mode.RequestBodyMode = filterv3.ProcessingMode_NONE
	e.proxy.plan.extproc.mode.ResponseBodyMode = filterv3.ProcessingMode_NONE
	r := e.post(t)
	if en := e.entry(t); r.status != 503 || p1.count() != 0 {
		t.Errorf("response %d %q, details %q, P1 calls %d", r.status, r.body, en.Details, p1.count())
	}
}

// After retries, the last reset's reply says so (router.cc onUpstreamReset:
// "retried and the latest reset reason").
func TestFallbackResetsExhausted(t *testing.T) {
	e := startFallback(t, fallback{deployments: []deployment{{priority: 0, backend: "b0", addr: closedAddr(t)}, {priority: 1, backend: "b1", addr: closedAddr(t)}},
		noUpstream: true}, WithBackOff(func(time.Duration) time.Duration { return 0 }))
	r := e.post(t)
	en := e.entry(t)
	want := "upstream connect error or disconnect/reset before headers. retried and the latest reset reason: remote connection failure, transport failure reason: delayed connect error: Connection refused"
	if r.status != 503 || r.body != want || en.Flags != "UF,URX" || en.Attempts != 3 {
		t.Errorf("response %d %q, flags %q, attempts %d", r.status, r.body, en.Flags, en.Attempts)
	}
}

// hostAddr is the recorder's address as the stand-in dials it.
func (u *upstreamRecorder) hostAddr(t *testing.T) string {
	t.Helper()
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.reqs) == 0 {
		return ""
	}
	return u.reqs[0].Context().Value(http.LocalAddrContextKey).(interface{ String() string }).String()
}

// With auto_host_sni each host's hostname is its SNI, which Go also
// verifies the certificate against, as auto_sni_san_validation does
// (tls.proto UpstreamTlsContext; upstream_impl.cc, transport socket
// options per host): what a cluster of several providers needs.
func TestFallbackAutoHostSNI(t *testing.T) {
	f := fallback{deployments: twoDeployments(nil, nil), cluster: func(c *clusterv3.Cluster) {
		c.TransportSocket = &corev3.TransportSocket{Name: "envoy.transport_sockets.tls", ConfigType: &corev3.TransportSocket_TypedConfig{
			TypedConfig: mustAny(t, &tlsv3.UpstreamTlsContext{AutoHostSni: true, AutoSniSanValidation: true,
				CommonTlsContext: &tlsv3.CommonTlsContext{ValidationContextType: &tlsv3.CommonTlsContext_ValidationContext{
					ValidationContext: &tlsv3.CertificateValidationContext{}}}})}}
	}}
	p, err := New(fallbackBootstrap(t, f, closedAddr(t), []string{closedAddr(t), closedAddr(t)}))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for i, h := range p.plan.clusters[fbCluster].lb.hosts {
		if sni := h.transport.TLSClientConfig.ServerName; sni != []string{"b0.example", "b1.example"}[i] {
			t.Errorf("host %d: SNI %q", i, sni)
		}
	}
}
