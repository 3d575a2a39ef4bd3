package standin

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

func withRetryPolicy(rp *routev3.RetryPolicy) setup {
	return setup{hcm: editRoute("up", func(r *routev3.Route) { r.GetRoute().RetryPolicy = rp })}
}

// headersThenBody sends the headers at once, then body parts after pause.
func headersThenBody(pause time.Duration, parts ...string) *upstreamRecorder {
	return &upstreamRecorder{handler: func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		for _, p := range parts {
			select {
			case <-time.After(pause):
			case <-r.Context().Done():
				return
			}
			io.WriteString(w, p)
			w.(http.Flusher).Flush()
		}
	}}
}

func responseStatuses(p *stubProc) []string {
	var out []string
	for _, m := range p.messages() {
		if h := m.GetResponseHeaders(); h != nil {
			out = append(out, string(h.GetHeaders().GetHeaders()[0].GetRawValue()))
		}
	}
	return out
}

// Route retry_policy with num_retries 0: per_try_timeout and
// per_try_idle_timeout (router.cc, upstream_request.cc).
func TestPerTryTimeouts(t *testing.T) {
	t.Run("per_try_timeout before the response headers: 504", func(t *testing.T) {
		p := &stubProc{}
		e := startWith(t, p, delayedUpstream(2*time.Second), withRetryPolicy(&routev3.RetryPolicy{
			NumRetries: wrapperspb.UInt32(0), PerTryTimeout: ms(100)}))
		r := e.do(t, "GET", "/", "", nil)
		en := e.entry(t)
		if r.status != 504 || r.body != "upstream request timeout" || en.Details != "upstream_per_try_timeout" || en.Flags != "UT" {
			t.Errorf("response %d %q, details %q flags %q", r.status, r.body, en.Details, en.Flags)
		}
		if s := responseStatuses(p); len(s) != 1 || s[0] != "504" {
			t.Errorf("processor saw response statuses %v; the router's reply goes through ext_proc", s)
		}
	})
	t.Run("per_try_timeout is ignored once the response started", func(t *testing.T) {
		e := startWith(t, &stubProc{}, headersThenBody(600*time.Millisecond, "data: a\n\n"), withRetryPolicy(&routev3.RetryPolicy{
			NumRetries: wrapperspb.UInt32(0), PerTryTimeout: ms(300)}))
		if r := e.do(t, "GET", "/", "", nil); r.status != 200 || r.body != "data: a\n\n" {
			t.Errorf("response %d %q", r.status, r.body)
		}
		e.entry(t)
	})
	t.Run("per_try_idle_timeout before the response headers: 504", func(t *testing.T) {
		e := startWith(t, &stubProc{}, delayedUpstream(2*time.Second), withRetryPolicy(&routev3.RetryPolicy{
			NumRetries: wrapperspb.UInt32(0), PerTryIdleTimeout: ms(100)}))
		r := e.do(t, "GET", "/", "", nil)
		en := e.entry(t)
		if r.status != 504 || r.body != "upstream request timeout" || en.Details != "upstream_per_try_idle_timeout" || en.Flags != "UT" {
			t.Errorf("response %d %q, details %q flags %q", r.status, r.body, en.Details, en.Flags)
		}
	})
	t.Run("per_try_idle_timeout is re-armed by every response byte", func(t *testing.T) {
		e := startWith(t, &stubProc{}, headersThenBody(100*time.Millisecond, "a", "b", "c", "d", "e", "f"), withRetryPolicy(&routev3.RetryPolicy{
			NumRetries: wrapperspb.UInt32(0), PerTryIdleTimeout: ms(350)}))
		if r := e.do(t, "GET", "/", "", nil); r.status != 200 || r.body != "abcdef" {
			t.Errorf("response %d %q", r.status, r.body)
		}
		e.entry(t)
	})
	t.Run("per_try_idle_timeout after the headers went out resets the stream", func(t *testing.T) {
		up := &upstreamRecorder{handler: func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, "data: a\n\n")
			w.(http.Flusher).Flush()
			select {
			case <-time.After(2 * time.Second):
			case <-r.Context().Done():
			}
		}}
		s := withRetryPolicy(&routev3.RetryPolicy{NumRetries: wrapperspb.UInt32(0), PerTryIdleTimeout: ms(300)})
		s.extproc = func(ep *filterv3.ExternalProcessor) {
			ep.ProcessingMode.ResponseBodyMode = filterv3.ProcessingMode_NONE
		}
		e := startWith(t, &stubProc{}, up, s)
		r := e.do(t, "GET", "/", "", nil)
		en := e.entry(t)
		if r.err == nil || r.body != "data: a\n\n" || en.Details != "upstream_per_try_idle_timeout" || en.Flags != "UT" {
			t.Errorf("client got %d %q, err %v; details %q flags %q; want a reset", r.status, r.body, r.err, en.Details, en.Flags)
		}
	})
	t.Run("the route timeout covers the whole upstream exchange", func(t *testing.T) {
		e := startWith(t, &stubProc{}, delayedUpstream(2*time.Second), setup{hcm: editRoute("up", func(r *routev3.Route) { r.GetRoute().Timeout = ms(100) })})
		r := e.do(t, "GET", "/", "", nil)
		en := e.entry(t)
		if r.status != 504 || r.body != "upstream request timeout" || en.Details != "response_timeout" || en.Flags != "UT" {
			t.Errorf("response %d %q, details %q flags %q", r.status, r.body, en.Details, en.Flags)
		}
	})
	t.Run("timeouts as Envoy computes them", func(t *testing.T) {
		if got := timeoutsOf(&routev3.RouteAction{}); got.route != 15*time.Second {
			t.Errorf("default route timeout %v, want Envoy's 15s", got.route)
		}
		got := timeoutsOf(&routev3.RouteAction{Timeout: ms(100), RetryPolicy: &routev3.RetryPolicy{PerTryTimeout: ms(200)}})
		if got.perTry != 0 {
			t.Errorf("per_try_timeout %v not below the route timeout must be ignored", got.perTry)
		}
	})
}

// What of RetryPolicy the stand-in does not implement is refused
// (route_components.proto; router/config_impl.cc, RetryPolicyImpl).
func TestRetryPolicyRefusals(t *testing.T) {
	for name, rp := range map[string]*routev3.RetryPolicy{
		"retriable_headers":         {RetryOn: "retriable-headers", RetriableHeaders: []*routev3.HeaderMatcher{{Name: "x"}}},
		"retriable_request_headers": {RetryOn: "5xx", RetriableRequestHeaders: []*routev3.HeaderMatcher{{Name: "x"}}},
		"gRPC retry_on":             {RetryOn: "5xx,unavailable"},
		"other retry priority":      {RetryOn: "5xx", RetryPriority: &routev3.RetryPolicy_RetryPriority{Name: "x"}},
		"refresh_cluster_on_retry":  {RetryOn: "5xx", RefreshClusterOnRetry: true},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := New(offlineBootstrap(t, withRetryPolicy(rp))); err == nil || !strings.Contains(err.Error(), "retry") {
				t.Errorf("New error = %v, want a retry_policy refusal", err)
			}
		})
	}
	for name, rp := range map[string]*routev3.RetryPolicy{
		"per-try timeouts with num_retries 0":    {NumRetries: wrapperspb.UInt32(0), PerTryTimeout: ms(100), PerTryIdleTimeout: ms(100)},
		"num_retries unset (Envoy retries once)": {RetryOn: "5xx", PerTryTimeout: ms(100)},
		"unknown retry_on tokens are ignored":    {RetryOn: "5xx,rest-before-request"},
		"retriable_status_codes":                 {RetryOn: "retriable-status-codes", RetriableStatusCodes: []uint32{429}},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := New(offlineBootstrap(t, withRetryPolicy(rp))); err != nil {
				t.Error(err)
			}
		})
	}
}

func withHCM(edit func(*hcmv3.HttpConnectionManager)) setup { return setup{hcm: edit} }

// partialBody is a POST whose body never completes.
const partialBody = "POST / HTTP/1.1\r\nHost: x\r\nX-Modelgate-Backend: up\r\nContent-Length: 10\r\n\r\nabc"

// The connection manager's request_timeout (conn_manager_impl.cc,
// onRequestTimeout) and stream_idle_timeout (onIdleTimeout).
func TestConnectionManagerTimeouts(t *testing.T) {
	t.Run("request_timeout before the body arrived: 408", func(t *testing.T) {
		p := &stubProc{}
		e := startWith(t, p, nil, withHCM(func(h *hcmv3.HttpConnectionManager) { h.RequestTimeout = ms(100) }))
		resp, body := rawRequest(t, e.url, partialBody)
		en := e.entry(t)
		if resp.StatusCode != 408 || body != "request timeout" || en.Details != "request_overall_timeout" || en.Flags != "" {
			t.Errorf("response %d %q, details %q flags %q", resp.StatusCode, body, en.Details, en.Flags)
		}
		if s := responseStatuses(p); len(s) != 1 || s[0] != "408" {
			t.Errorf("processor saw %v; the reply goes through the response path", s)
		}
	})
	t.Run("request_timeout with the body received but not sent upstream: 504", func(t *testing.T) {
		p := &stubProc{reply: func(req *extprocv3.ProcessingRequest) *extprocv3.ProcessingResponse {
			if req.GetRequestBody() != nil {
				time.Sleep(800 * time.Millisecond)
			}
			return nil
		}}
		up := &upstreamRecorder{}
		e := startWith(t, p, up, withHCM(func(h *hcmv3.HttpConnectionManager) { h.RequestTimeout = ms(200) }))
		r := e.do(t, "POST", "/", "body", nil)
		en := e.entry(t)
		if r.status != 504 || r.body != "request timeout" || en.Details != "request_overall_timeout" || up.count() != 0 {
			t.Errorf("response %d %q, details %q, upstream calls %d", r.status, r.body, en.Details, up.count())
		}
		if s := responseStatuses(p); len(s) != 1 || s[0] != "504" {
			t.Errorf("processor saw %v after its late request_body reply", s)
		}
	})
	t.Run("request_timeout is disarmed once the request went upstream", func(t *testing.T) {
		e := startWith(t, &stubProc{}, delayedUpstream(1200*time.Millisecond), withHCM(func(h *hcmv3.HttpConnectionManager) { h.RequestTimeout = ms(500) }))
		if r := e.do(t, "POST", "/", "body", nil); r.status != 200 || r.body != "late" {
			t.Errorf("response %d %q", r.status, r.body)
		}
		e.entry(t)
	})
	t.Run("stream_idle_timeout before the body arrived: 408", func(t *testing.T) {
		e := startWith(t, &stubProc{}, nil, withHCM(func(h *hcmv3.HttpConnectionManager) { h.StreamIdleTimeout = ms(100) }))
		resp, body := rawRequest(t, e.url, partialBody)
		en := e.entry(t)
		if resp.StatusCode != 408 || body != "stream timeout" || en.Details != "stream_idle_timeout" || en.Flags != "SI" {
			t.Errorf("response %d %q, details %q flags %q", resp.StatusCode, body, en.Details, en.Flags)
		}
	})
	t.Run("stream_idle_timeout after the headers went out resets the stream", func(t *testing.T) {
		up := &upstreamRecorder{handler: func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, "data: a\n\n")
			w.(http.Flusher).Flush()
			select {
			case <-time.After(2 * time.Second):
			case <-r.Context().Done():
			}
		}}
		e := startWith(t, &stubProc{reply: streamedReply}, up, withHCM(func(h *hcmv3.HttpConnectionManager) { h.StreamIdleTimeout = ms(400) }))
		r := e.do(t, "GET", "/", "", nil)
		en := e.entry(t)
		if r.err == nil || r.body != "data: a\n\n" || en.Details != "stream_idle_timeout" || en.Flags != "SI" {
			t.Errorf("client got %d %q, err %v; details %q flags %q; want a reset", r.status, r.body, r.err, en.Details, en.Flags)
		}
	})
}
