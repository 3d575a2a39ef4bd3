package standin

import (
	"net/http"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

func requestHeadersReply(c *extprocv3.CommonResponse) func(*extprocv3.ProcessingRequest) *extprocv3.ProcessingResponse {
	return func(req *extprocv3.ProcessingRequest) *extprocv3.ProcessingResponse {
		if req.GetRequestHeaders() != nil {
			return headersReply(c)
		}
		return nil
	}
}

// Route selection and clear_route_cache.
func TestMust06RouteSelection(t *testing.T) {
	tests := []struct {
		name      string
		reply     *extprocv3.CommonResponse
		header    map[string]string
		wantRoute string
	}{
		{"header set without clear_route_cache keeps the first route", &extprocv3.CommonResponse{HeaderMutation: route()}, nil, "not_found"},
		{"clear_route_cache without a header mutation is ignored", &extprocv3.CommonResponse{ClearRouteCache: true}, map[string]string{"X-Other": "1"}, "not_found"},
		{"header set with clear_route_cache re-routes", &extprocv3.CommonResponse{HeaderMutation: route(), ClearRouteCache: true}, nil, "up"},
		{"the first route comes from the client's headers", &extprocv3.CommonResponse{}, map[string]string{"X-Modelgate-Backend": "up"}, "up"},
		{"clearing re-routes on the mutated headers", &extprocv3.CommonResponse{HeaderMutation: &extprocv3.HeaderMutation{RemoveHeaders: []string{"x-modelgate-backend"}}, ClearRouteCache: true},
			map[string]string{"X-Modelgate-Backend": "up"}, "not_found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := start(t, &stubProc{reply: requestHeadersReply(tt.reply)}, nil, nil)
			e.do(t, "GET", "/", "", tt.header)
			if en := e.entry(t); en.Route != tt.wantRoute {
				t.Errorf("route = %q, want %q", en.Route, tt.wantRoute)
			}
		})
	}
}

// Header mutation rules (mutation_utils.cc, default mutation_rules).
func TestMust07HeaderMutationRules(t *testing.T) {
	mut := &extprocv3.HeaderMutation{
		RemoveHeaders: []string{"x-gone", ":path", "host", "x-envoy-keep"},
		SetHeaders: []*corev3.HeaderValueOption{
			setHeader("x-modelgate-backend", "up"),
			setHeader("X-Upper", "v"),
			setHeader(":path", "/rewritten"),
			setHeader(":authority", "evil.example"),
			setHeader("x-envoy-new", "no"),
			{Header: &corev3.HeaderValue{Key: "x-value-only", Value: "ignored"}},
			{Header: &corev3.HeaderValue{Key: "x-appended", RawValue: []byte("2")}, Append: wrapperspb.Bool(true)},
			{Header: &corev3.HeaderValue{Key: "x-overwritten", RawValue: []byte("new")}, AppendAction: corev3.HeaderValueOption_APPEND_IF_EXISTS_OR_ADD},
		},
	}
	up := &upstreamRecorder{}
	e := start(t, &stubProc{reply: requestHeadersReply(&extprocv3.CommonResponse{HeaderMutation: mut, ClearRouteCache: true})}, up, nil)
	e.do(t, "GET", "/orig", "", map[string]string{"X-Gone": "1", "X-Envoy-Keep": "1", "X-Appended": "1", "X-Overwritten": "old"})
	e.entry(t)
	if up.count() != 1 {
		t.Fatal("no upstream request")
	}
	got := up.reqs[0]
	checks := map[string]bool{
		"removed":                          got.Header.Get("X-Gone") == "",
		":path set":                        got.URL.Path == "/rewritten",
		":authority protected":             !strings.Contains(got.Host, "evil"),
		"x-envoy-* protected":              got.Header.Get("X-Envoy-Keep") == "1" && got.Header.Get("X-Envoy-New") == "",
		"upper-case name lower-cased":      got.Header.Get("X-Upper") == "v",
		"value without raw_value empty":    len(got.Header.Values("X-Value-Only")) == 1 && got.Header.Get("X-Value-Only") == "",
		"append adds a value":              strings.Join(got.Header.Values("X-Appended"), ",") == "1,2",
		"append_action ignored: overwrite": strings.Join(got.Header.Values("X-Overwritten"), ",") == "new",
	}
	for name, ok := range checks {
		if !ok {
			t.Errorf("%s: upstream got %s %v %v", name, got.Host, got.URL, got.Header)
		}
	}
	t.Run("invalid characters fail with 500", func(t *testing.T) {
		bad := &extprocv3.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{setHeader("x-bad", "a\r\nb")}}
		e := start(t, &stubProc{reply: requestHeadersReply(&extprocv3.CommonResponse{HeaderMutation: bad})}, nil, nil)
		if r := e.do(t, "GET", "/", "", nil); r.status != 500 {
			t.Errorf("status = %d, want 500", r.status)
		}
		if en := e.entry(t); en.Details != "header_mutation_set_contains_invalid_character" {
			t.Errorf("details = %q", en.Details)
		}
	})
}

func requestBodyReply(c *extprocv3.CommonResponse) func(*extprocv3.ProcessingRequest) *extprocv3.ProcessingResponse {
	return func(req *extprocv3.ProcessingRequest) *extprocv3.ProcessingResponse {
		if req.GetRequestBody() != nil {
			return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestBody{RequestBody: &extprocv3.BodyResponse{Response: c}}}
		}
		return nil
	}
}

func newBody(b string) *extprocv3.BodyMutation {
	return &extprocv3.BodyMutation{Mutation: &extprocv3.BodyMutation_Body{Body: []byte(b)}}
}

// Content-length rules (processor_state.h, shouldRemoveContentLength).
func TestMust08ContentLength(t *testing.T) {
	t.Run("buffered body mutation with a stale content-length fails", func(t *testing.T) {
		e := start(t, &stubProc{reply: requestBodyReply(&extprocv3.CommonResponse{BodyMutation: newBody("longer body")})}, nil, nil)
		if r := e.do(t, "POST", "/", "short", nil); r.status != 500 {
			t.Errorf("status = %d, want 500", r.status)
		}
		if en := e.entry(t); en.Details != "mismatch_between_content_length_and_the_length_of_the_mutated_body" {
			t.Errorf("details = %q", en.Details)
		}
	})
	t.Run("buffered body mutation with a matching content-length passes", func(t *testing.T) {
		up := &upstreamRecorder{}
		mut := &extprocv3.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{setHeader("content-length", "11")}}
		e := start(t, &stubProc{reply: requestBodyReply(&extprocv3.CommonResponse{BodyMutation: newBody("longer body"), HeaderMutation: mut})}, up, nil)
		if r := e.do(t, "POST", "/", "short", nil); r.status != 200 || string(up.bodies[0]) != "longer body" {
			t.Errorf("status = %d, upstream body %q", r.status, up.bodies)
		}
		e.entry(t)
	})
	t.Run("a switch to STREAMED keeps the upstream content-length, and a set one is skipped", func(t *testing.T) {
		p := &stubProc{reply: func(req *extprocv3.ProcessingRequest) *extprocv3.ProcessingResponse {
			r := streamedReply(req)
			if r != nil {
				r.GetResponseHeaders().Response = &extprocv3.CommonResponse{HeaderMutation: &extprocv3.HeaderMutation{
					SetHeaders: []*corev3.HeaderValueOption{setHeader("content-length", "5")}}}
			}
			return r
		}}
		e := start(t, p, nil, nil)
		r := e.do(t, "GET", "/", "", nil)
		if r.header.Get("Content-Length") != "19" || r.body != "hello from upstream" {
			t.Errorf("content-length %q body %q", r.header.Get("Content-Length"), r.body)
		}
		e.entry(t)
	})
}

// CONTINUE versus CONTINUE_AND_REPLACE.
func TestMust09ContinueAndReplace(t *testing.T) {
	t.Run("a body mutation in a CONTINUE header reply is ignored", func(t *testing.T) {
		up := &upstreamRecorder{}
		e := start(t, &stubProc{reply: requestHeadersReply(&extprocv3.CommonResponse{HeaderMutation: route(), ClearRouteCache: true, BodyMutation: newBody("nope")})}, up, nil)
		e.do(t, "POST", "/", "original", nil)
		e.entry(t)
		if string(up.bodies[0]) != "original" {
			t.Errorf("upstream body = %q", up.bodies[0])
		}
	})
	t.Run("CONTINUE_AND_REPLACE replaces the body and ends request processing", func(t *testing.T) {
		up := &upstreamRecorder{}
		p := &stubProc{reply: requestHeadersReply(&extprocv3.CommonResponse{Status: extprocv3.CommonResponse_CONTINUE_AND_REPLACE,
			HeaderMutation: route(), ClearRouteCache: true, BodyMutation: newBody("replaced")})}
		e := start(t, p, up, nil)
		e.do(t, "POST", "/", "original", nil)
		e.entry(t)
		if string(up.bodies[0]) != "replaced" {
			t.Errorf("upstream body = %q", up.bodies[0])
		}
		for _, m := range p.messages() {
			if m.GetRequestBody() != nil {
				t.Error("a request_body message was sent after CONTINUE_AND_REPLACE")
			}
		}
	})
}

// Only the reply Envoy waits for is accepted.
func TestMust10StateMachine(t *testing.T) {
	wrongCase := func(req *extprocv3.ProcessingRequest) *extprocv3.ProcessingResponse {
		if req.GetRequestHeaders() != nil {
			return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseBody{ResponseBody: &extprocv3.BodyResponse{}}}
		}
		return nil
	}
	empty := func(req *extprocv3.ProcessingRequest) *extprocv3.ProcessingResponse {
		if req.GetRequestHeaders() != nil {
			return &extprocv3.ProcessingResponse{}
		}
		return nil
	}
	for name, reply := range map[string]func(*extprocv3.ProcessingRequest) *extprocv3.ProcessingResponse{"wrong case": wrongCase, "empty response": empty} {
		t.Run(name, func(t *testing.T) {
			e := start(t, &stubProc{reply: reply}, nil, nil)
			if r := e.do(t, "GET", "/", "", nil); r.status != 500 {
				t.Errorf("status = %d, want 500", r.status)
			}
			e.entry(t)
		})
	}
	t.Run("failure_mode_allow continues without ext_proc", func(t *testing.T) {
		up := &upstreamRecorder{}
		e := start(t, &stubProc{reply: wrongCase}, up, func(ep *filterv3.ExternalProcessor) { ep.FailureModeAllow = true })
		e.do(t, "GET", "/", "", map[string]string{"X-Modelgate-Backend": "up"})
		if en := e.entry(t); en.Status != 200 || up.count() != 1 {
			t.Errorf("status %d, upstream calls %d; want the request to go on unprocessed", en.Status, up.count())
		}
	})
}

var _ = http.StatusOK
