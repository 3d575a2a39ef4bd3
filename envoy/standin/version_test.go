package standin

import (
	"testing"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
)

// On Envoy 1.34 and 1.35 an upstream ext_proc's immediate response is
// ignored (send_immediate_resp_upstream_ignored) and nothing resumes the
// attempt: it hangs until its per-try timeout, which resets it, and the
// router retries on the next deployment. So an attempt the server refused
// (here with 400, which must end the request) is retried instead, and the
// client waits a per-try timeout for it. 1.36 and later answer at once.
// The per-try timeout runs on the test's clock.
func TestUpstreamRepliesIgnoredBefore136(t *testing.T) {
	refuseFirst := func(n int, req *extprocv3.ProcessingRequest) *extprocv3.ProcessingResponse {
		if n == 1 && req.GetRequestHeaders() != nil {
			return immediateReply(&extprocv3.ImmediateResponse{Status: &typev3.HttpStatus{Code: 400}, Body: []byte("refused"), Details: "refused"})
		}
		return nil
	}
	for _, tt := range []struct {
		version    string
		wantStatus int
		wantCalls  int // to the second deployment
	}{
		{"1.37", 400, 0},
		{"1.36", 400, 0},
		{"1.35", 200, 1},
		{"1.34", 200, 1},
	} {
		t.Run(tt.version, func(t *testing.T) {
			clock := newTimerClock()
			p0, p1 := &upstreamRecorder{}, &upstreamRecorder{}
			e := startFallback(t, fallback{deployments: twoDeployments(p0, p1), upstream: refuseFirst},
				WithEnvoyVersion(tt.version), WithClock(clock), WithBackOff(func(time.Duration) time.Duration { return 0 }))
			done := make(chan response, 1)
			go func() { done <- e.post(t) }()
			if tt.wantCalls > 0 {
				// Hanging, as the old releases do: once the first attempt's
				// filter has its request headers (its per-try timer started
				// with the attempt), the per-try timeout (5s) comes on the
				// test's clock.
				for deadline := time.Now().Add(10 * time.Second); len(e.up.all()) == 0; time.Sleep(time.Millisecond) {
					if time.Now().After(deadline) {
						t.Fatal("the first attempt never reached the upstream filter")
					}
				}
				clock.Advance(5 * time.Second)
			}
			r := <-done
			if r.status != tt.wantStatus || p0.count() != 0 || p1.count() != tt.wantCalls {
				t.Errorf("status %d %q, deployment calls %d and %d; want %d and %d on the second", r.status, r.body,
					p0.count(), p1.count(), tt.wantStatus, tt.wantCalls)
			}
		})
	}
}

// Before 1.37, Envoy's own replies skip the ext_proc filter's response
// path (skip_ext_proc_on_local_reply): the server never sees them.
func TestLocalRepliesSkipExtProcBefore137(t *testing.T) {
	for _, tt := range []struct {
		version  string
		wantSeen int
	}{{"1.37", 1}, {"1.36", 0}, {"1.34", 0}} {
		t.Run(tt.version, func(t *testing.T) {
			p := &stubProc{}
			e := startWith(t, p, answering(200), setup{}, WithEnvoyVersion(tt.version))
			e.proxy.plan.clusters["up"].lb.hosts[0].addr = closedAddr(t) // a connect failure: 503 from the router
			r := e.do(t, "GET", "/v1/models", "", nil)
			if r.status != 503 || len(responseStatuses(p)) != tt.wantSeen {
				t.Errorf("status %d; the server saw %v response headers, want %d", r.status, responseStatuses(p), tt.wantSeen)
			}
		})
	}
}

func TestEnvoyVersionRefused(t *testing.T) {
	for _, v := range []string{"1.33", "2.0", "latest"} {
		if _, err := New(offlineBootstrap(t, setup{}), WithEnvoyVersion(v)); err == nil {
			t.Errorf("WithEnvoyVersion(%q) accepted", v)
		}
	}
}
