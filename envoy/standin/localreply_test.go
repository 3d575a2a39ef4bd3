package standin

import (
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/config/accesslog/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// Route request_headers_to_remove edits the upstream request after route
// selection (router.cc, finalizeRequestHeaders).
func TestRequestHeadersToRemove(t *testing.T) {
	up := &upstreamRecorder{}
	e := startWith(t, &stubProc{reply: requestHeadersReply(&extprocv3.CommonResponse{})}, up, setup{hcm: editRoute("up", func(r *routev3.Route) {
		r.RequestHeadersToRemove = []string{"X-Modelgate-Backend", "x-secret"}
	})})
	e.do(t, "GET", "/", "", map[string]string{"X-Modelgate-Backend": "up", "X-Secret": "s", "X-Kept": "k"})
	if en := e.entry(t); en.Route != "up" || up.count() != 1 {
		t.Fatalf("route %q, upstream calls %d; the header must still select the route", en.Route, up.count())
	}
	if h := up.reqs[0].Header; h.Get("X-Modelgate-Backend") != "" || h.Get("X-Secret") != "" || h.Get("X-Kept") != "k" {
		t.Errorf("upstream headers %v", h)
	}
	for _, name := range []string{":path", "host"} {
		if _, err := New(offlineBootstrap(t, setup{hcm: editRoute("up", func(r *routev3.Route) { r.RequestHeadersToRemove = []string{name} })})); err == nil {
			t.Errorf("removing %q must be refused, as Envoy does", name)
		}
	}
}

func statusFilter(op accesslogv3.ComparisonFilter_Op, v uint32) *accesslogv3.AccessLogFilter {
	return &accesslogv3.AccessLogFilter{FilterSpecifier: &accesslogv3.AccessLogFilter_StatusCodeFilter{StatusCodeFilter: &accesslogv3.StatusCodeFilter{
		Comparison: &accesslogv3.ComparisonFilter{Op: op, Value: &corev3.RuntimeUInt32{DefaultValue: v, RuntimeKey: "k"}}}}}
}

func flagFilter(flags ...string) *accesslogv3.AccessLogFilter {
	return &accesslogv3.AccessLogFilter{FilterSpecifier: &accesslogv3.AccessLogFilter_ResponseFlagFilter{ResponseFlagFilter: &accesslogv3.ResponseFlagFilter{Flags: flags}}}
}

func andFilter(fs ...*accesslogv3.AccessLogFilter) *accesslogv3.AccessLogFilter {
	return &accesslogv3.AccessLogFilter{FilterSpecifier: &accesslogv3.AccessLogFilter_AndFilter{AndFilter: &accesslogv3.AndFilter{Filters: fs}}}
}

func orFilter(fs ...*accesslogv3.AccessLogFilter) *accesslogv3.AccessLogFilter {
	return &accesslogv3.AccessLogFilter{FilterSpecifier: &accesslogv3.AccessLogFilter_OrFilter{OrFilter: &accesslogv3.OrFilter{Filters: fs}}}
}

func textFormat(s, contentType string) *corev3.SubstitutionFormatString {
	return &corev3.SubstitutionFormatString{Format: &corev3.SubstitutionFormatString_TextFormatSource{
		TextFormatSource: &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: s}}}, ContentType: contentType}
}

func addedHeader(k, v string) *corev3.HeaderValueOption {
	return &corev3.HeaderValueOption{Header: &corev3.HeaderValue{Key: k, Value: v}, AppendAction: corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD}
}

func withLocalReply(lrc *hcmv3.LocalReplyConfig, more func(*hcmv3.HttpConnectionManager)) setup {
	return setup{hcm: func(h *hcmv3.HttpConnectionManager) {
		h.LocalReplyConfig = lrc
		if more != nil {
			more(h)
		}
	}}
}

// local_reply_config as Envoy's local_reply.cc applies it (HTTP connection
// manager docs: local_reply).
func TestLocalReplyConfig(t *testing.T) {
	t.Run("a mapper rewrites body, headers, status and format in Envoy's order", func(t *testing.T) {
		p := &stubProc{reply: requestHeadersReply(&extprocv3.CommonResponse{})}
		e := startWith(t, p, nil, withLocalReply(&hcmv3.LocalReplyConfig{Mappers: []*hcmv3.ResponseMapper{{
			Filter:             statusFilter(accesslogv3.ComparisonFilter_EQ, 404),
			StatusCode:         wrapperspb.UInt32(410),
			HeadersToAdd:       []*corev3.HeaderValueOption{addedHeader("x-code", "%RESPONSE_CODE% %RESPONSE_CODE_DETAILS% %RESPONSE_FLAGS%")},
			BodyFormatOverride: textFormat("%RESPONSE_CODE%|%LOCAL_REPLY_BODY%", "application/x-test"),
		}}}, nil))
		r := e.do(t, "GET", "/", "", nil)
		e.entry(t)
		if r.status != 410 || r.header.Get("X-Code") != "404 direct_response -" || r.body != "410|"+notFoundBody ||
			r.header.Get("Content-Type") != "application/x-test" {
			t.Errorf("response %d %v %q", r.status, r.header, r.body)
		}
		if s := responseStatuses(p); len(s) != 1 || s[0] != "410" {
			t.Errorf("processor saw %v; it must see the mapped reply", s)
		}
	})
	t.Run("mapper body and the top-level body_format when the mapper has none", func(t *testing.T) {
		body := "replaced"
		e := startWith(t, &stubProc{reply: requestHeadersReply(&extprocv3.CommonResponse{})}, nil, withLocalReply(&hcmv3.LocalReplyConfig{
			Mappers:    []*hcmv3.ResponseMapper{{Filter: statusFilter(accesslogv3.ComparisonFilter_GE, 400), Body: &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: body}}}},
			BodyFormat: textFormat(`{"e":"%LOCAL_REPLY_BODY%"}`, "application/json"),
		}, nil))
		r := e.do(t, "GET", "/", "", nil)
		e.entry(t)
		if r.status != 404 || r.body != `{"e":"replaced"}` || r.header.Get("Content-Type") != "application/json" {
			t.Errorf("response %d %q %q", r.status, r.body, r.header.Get("Content-Type"))
		}
	})
	t.Run("no mapper matches: body_format alone, and the sender's content-type stays", func(t *testing.T) {
		e := startWith(t, &stubProc{reply: requestHeadersReply(&extprocv3.CommonResponse{})}, nil, withLocalReply(&hcmv3.LocalReplyConfig{
			Mappers:    []*hcmv3.ResponseMapper{{Filter: statusFilter(accesslogv3.ComparisonFilter_LE, 399), StatusCode: wrapperspb.UInt32(500)}},
			BodyFormat: textFormat("%LOCAL_REPLY_BODY%", "text/x-unused"),
		}, nil))
		r := e.do(t, "GET", "/", "", nil)
		e.entry(t)
		if r.status != 404 || r.body != notFoundBody || r.header.Get("Content-Type") != "application/json" {
			t.Errorf("response %d %q %q", r.status, r.body, r.header.Get("Content-Type"))
		}
	})
	t.Run("response flags, and_filter and or_filter", func(t *testing.T) {
		l, _ := net.Listen("tcp", "127.0.0.1:0")
		closed := l.Addr().String()
		l.Close()
		e := startWith(t, &stubProc{}, nil, withLocalReply(&hcmv3.LocalReplyConfig{Mappers: []*hcmv3.ResponseMapper{
			{Filter: flagFilter("UT"), BodyFormatOverride: textFormat("timeout", "")},
			{Filter: andFilter(statusFilter(accesslogv3.ComparisonFilter_GE, 500), flagFilter()), BodyFormatOverride: textFormat("flagged %RESPONSE_FLAGS%", "")},
			{Filter: orFilter(statusFilter(accesslogv3.ComparisonFilter_EQ, 503), statusFilter(accesslogv3.ComparisonFilter_EQ, 404)), BodyFormatOverride: textFormat("never", "")},
		}}, nil), withUpstreamAddr(closed))
		r := e.do(t, "GET", "/", "", nil)
		en := e.entry(t)
		if r.status != 503 || r.body != "flagged UF" || r.header.Get("Content-Type") != "text/plain" || en.Flags != "UF" {
			t.Errorf("response %d %q %q, flags %q", r.status, r.body, r.header.Get("Content-Type"), en.Flags)
		}
	})
	t.Run("ext_proc's immediate response is mapped and skips the response path", func(t *testing.T) {
		p := &stubProc{reply: func(req *extprocv3.ProcessingRequest) *extprocv3.ProcessingResponse {
			return immediateReply(&extprocv3.ImmediateResponse{Status: &typev3.HttpStatus{Code: 401}, Body: []byte("nope"), Details: "no key"})
		}}
		e := startWith(t, p, nil, withLocalReply(&hcmv3.LocalReplyConfig{Mappers: []*hcmv3.ResponseMapper{{
			Filter: statusFilter(accesslogv3.ComparisonFilter_EQ, 401), BodyFormatOverride: textFormat(`{"error":"%LOCAL_REPLY_BODY%","why":"%RESPONSE_CODE_DETAILS%"}`, "application/json"),
		}}}, nil))
		r := e.do(t, "GET", "/", "", nil)
		en := e.entry(t)
		if r.status != 401 || r.body != `{"error":"nope","why":"no_key"}` || r.header.Get("Content-Type") != "application/json" || en.Flags != "" {
			t.Errorf("response %d %q %q, flags %q", r.status, r.body, r.header.Get("Content-Type"), en.Flags)
		}
		if k := kinds(p); len(k) != 1 {
			t.Errorf("messages %v; want no response path", k)
		}
	})
	t.Run("ext_proc failures are mapped", func(t *testing.T) {
		p := &stubProc{process: func(s extprocv3.ExternalProcessor_ProcessServer) error {
			s.Recv()
			return status.Error(codes.Internal, "boom")
		}}
		e := startWith(t, p, nil, withLocalReply(&hcmv3.LocalReplyConfig{Mappers: []*hcmv3.ResponseMapper{{
			Filter: statusFilter(accesslogv3.ComparisonFilter_GE, 500), BodyFormatOverride: textFormat("failed: %RESPONSE_CODE_DETAILS%", ""),
		}}}, nil))
		r := e.do(t, "GET", "/", "", nil)
		e.entry(t)
		if r.status != 500 || r.body != "failed: ext_proc_error_gRPC_error_13{boom}" {
			t.Errorf("response %d %q", r.status, r.body)
		}
	})
	t.Run("the stand-in's 413 is mapped and goes through ext_proc", func(t *testing.T) {
		p := &stubProc{}
		e := startWith(t, p, nil, withLocalReply(&hcmv3.LocalReplyConfig{Mappers: []*hcmv3.ResponseMapper{{
			Filter: statusFilter(accesslogv3.ComparisonFilter_EQ, 413), BodyFormatOverride: textFormat("too big", ""),
		}}}, nil))
		r := e.do(t, "POST", "/", strings.Repeat("x", 1<<20+1), nil)
		en := e.entry(t)
		if r.status != 413 || r.body != "too big" || en.Flags != "" {
			t.Errorf("response %d %q, flags %q", r.status, r.body, en.Flags)
		}
		if s := responseStatuses(p); len(s) != 1 || s[0] != "413" {
			t.Errorf("processor saw %v", s)
		}
	})
	t.Run("a content-type set by headers_to_add is kept", func(t *testing.T) {
		e := startWith(t, &stubProc{reply: requestHeadersReply(&extprocv3.CommonResponse{})}, nil, withLocalReply(&hcmv3.LocalReplyConfig{Mappers: []*hcmv3.ResponseMapper{{
			Filter:             statusFilter(accesslogv3.ComparisonFilter_EQ, 404),
			HeadersToAdd:       []*corev3.HeaderValueOption{addedHeader("content-type", "text/x-mine")},
			BodyFormatOverride: textFormat("gone", "application/json"),
		}}}, nil))
		r := e.do(t, "GET", "/", "", nil)
		e.entry(t)
		if r.body != "gone" || r.header.Get("Content-Type") != "text/x-mine" {
			t.Errorf("response %q %q", r.body, r.header.Get("Content-Type"))
		}
	})
}

// Response flags on the stand-in's replies, as in the access log.
func TestResponseFlags(t *testing.T) {
	t.Run("NR without a route", func(t *testing.T) {
		e := startWith(t, &stubProc{reply: requestHeadersReply(&extprocv3.CommonResponse{})}, nil, setup{hcm: func(h *hcmv3.HttpConnectionManager) {
			vh := h.GetRouteConfig().GetVirtualHosts()[0]
			vh.Routes = vh.Routes[:1]
		}})
		r := e.do(t, "GET", "/", "", nil)
		if en := e.entry(t); r.status != 404 || en.Flags != "NR" || en.Details != "route_not_found" {
			t.Errorf("status %d, flags %q details %q", r.status, en.Flags, en.Details)
		}
	})
	t.Run("none for direct responses and ext_proc errors", func(t *testing.T) {
		e := start(t, &stubProc{reply: requestHeadersReply(&extprocv3.CommonResponse{})}, nil, nil)
		e.do(t, "GET", "/", "", nil)
		if en := e.entry(t); en.Flags != "" {
			t.Errorf("direct response flags %q", en.Flags)
		}
		e2 := start(t, &stubProc{reply: func(*extprocv3.ProcessingRequest) *extprocv3.ProcessingResponse {
			time.Sleep(100 * time.Millisecond)
			return nil
		}},
			nil, func(ep *filterv3.ExternalProcessor) { ep.MessageTimeout = ms(20) })
		r := e2.do(t, "GET", "/", "", nil)
		if en := e2.entry(t); r.status != 504 || en.Flags != "" || en.Details != "ext_proc_error_per-message_timeout_exceeded" {
			t.Errorf("status %d flags %q details %q", r.status, en.Flags, en.Details)
		}
	})
}

func TestLocalReplyConfigRefusals(t *testing.T) {
	tests := map[string]*hcmv3.LocalReplyConfig{
		"json_format": {BodyFormat: &corev3.SubstitutionFormatString{Format: &corev3.SubstitutionFormatString_JsonFormat{}}},
		"header_filter": {Mappers: []*hcmv3.ResponseMapper{{Filter: &accesslogv3.AccessLogFilter{FilterSpecifier: &accesslogv3.AccessLogFilter_HeaderFilter{
			HeaderFilter: &accesslogv3.HeaderFilter{Header: &routev3.HeaderMatcher{Name: "x", HeaderMatchSpecifier: &routev3.HeaderMatcher_PresentMatch{PresentMatch: true}}}}}}}},
		"other operator": {BodyFormat: textFormat("%START_TIME%", "")},
		"NE":             {Mappers: []*hcmv3.ResponseMapper{{Filter: statusFilter(accesslogv3.ComparisonFilter_NE, 200)}}},
		"no runtime_key": {Mappers: []*hcmv3.ResponseMapper{{Filter: &accesslogv3.AccessLogFilter{FilterSpecifier: &accesslogv3.AccessLogFilter_StatusCodeFilter{StatusCodeFilter: &accesslogv3.StatusCodeFilter{
			Comparison: &accesslogv3.ComparisonFilter{Value: &corev3.RuntimeUInt32{DefaultValue: 404}}}}}}}},
		"body in a header": {Mappers: []*hcmv3.ResponseMapper{{Filter: flagFilter(), HeadersToAdd: []*corev3.HeaderValueOption{addedHeader("x", "%LOCAL_REPLY_BODY%")}}}},
	}
	for name, lrc := range tests {
		t.Run(name, func(t *testing.T) {
			if _, err := New(offlineBootstrap(t, withLocalReply(lrc, nil))); err == nil || !strings.Contains(err.Error(), "local_reply_config") {
				t.Errorf("New error = %v, want a local_reply_config refusal", err)
			}
		})
	}
}

// With always_set_request_id_in_response, as the generated bootstrap sets
// it, Envoy's own replies carry the request's x-request-id too; without
// it they carry none.
func TestAlwaysSetRequestID(t *testing.T) {
	for _, always := range []bool{true, false} {
		e := startWith(t, &stubProc{reply: requestHeadersReply(&extprocv3.CommonResponse{})}, &upstreamRecorder{}, setup{
			hcm: func(h *hcmv3.HttpConnectionManager) { h.AlwaysSetRequestIdInResponse = always }})
		r := e.do(t, "GET", "/", "", map[string]string{"X-Request-Id": "req-1"}) // no routing header: no route, a 404
		if r.err != nil || r.status != http.StatusNotFound {
			t.Fatalf("always=%v: %d %v", always, r.status, r.err)
		}
		if got := r.header.Get("X-Request-Id"); always && got != "req-1" || !always && got != "" {
			t.Errorf("always=%v: x-request-id %q", always, got)
		}
	}
}
