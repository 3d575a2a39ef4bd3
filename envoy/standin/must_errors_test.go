package standin

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
)

// Stream errors and the per-message timeout.
func TestMust11Errors(t *testing.T) {
	t.Run("gRPC error gives 500 with an empty body", func(t *testing.T) {
		p := &stubProc{process: func(s extprocv3.ExternalProcessor_ProcessServer) error {
			s.Recv()
			return status.Error(codes.Internal, "boom")
		}}
		e := start(t, p, nil, nil)
		if r := e.do(t, "GET", "/", "", nil); r.status != 500 || r.body != "" {
			t.Errorf("response = %d %q", r.status, r.body)
		}
		if en := e.entry(t); !strings.HasPrefix(en.Details, "ext_proc_error_gRPC_error_") {
			t.Errorf("details = %q", en.Details)
		}
	})
	t.Run("a clean close continues unmodified", func(t *testing.T) {
		up := &upstreamRecorder{}
		p := &stubProc{process: func(s extprocv3.ExternalProcessor_ProcessServer) error {
			s.Recv()
			return nil
		}}
		e := start(t, p, up, nil)
		r := e.do(t, "GET", "/", "", map[string]string{"X-Modelgate-Backend": "up"})
		if r.status != 200 || up.count() != 1 {
			t.Errorf("status %d, upstream calls %d", r.status, up.count())
		}
		e.entry(t)
	})
	t.Run("the per-message timeout gives 504", func(t *testing.T) {
		p := &stubProc{reply: func(req *extprocv3.ProcessingRequest) *extprocv3.ProcessingResponse {
			time.Sleep(200 * time.Millisecond)
			return nil
		}}
		e := start(t, p, nil, func(ep *filterv3.ExternalProcessor) { ep.MessageTimeout = ms(50) })
		if r := e.do(t, "GET", "/", "", nil); r.status != 504 {
			t.Errorf("status = %d, want 504", r.status)
		}
		e.entry(t)
	})
	t.Run("the default message timeout is Envoy's 200ms", func(t *testing.T) {
		pl, err := compileExtProc(&filterv3.ExternalProcessor{GrpcService: &corev3.GrpcService{TargetSpecifier: &corev3.GrpcService_EnvoyGrpc_{EnvoyGrpc: &corev3.GrpcService_EnvoyGrpc{ClusterName: "x"}}}}, false)
		if err != nil || pl.messageTimeout != 200*time.Millisecond {
			t.Errorf("default timeout = %v, %v", pl.messageTimeout, err)
		}
	})
	t.Run("an error after the headers went out aborts the connection", func(t *testing.T) {
		p := &stubProc{process: func(s extprocv3.ExternalProcessor_ProcessServer) error {
			for {
				req, err := s.Recv()
				if err != nil {
					return nil
				}
				if b := req.GetResponseBody(); b != nil {
					s.Send(bodyReplyWith(b.Body))
					return status.Error(codes.Internal, "late")
				}
				s.Send(orDefault(streamedReply(req), req))
			}
		}}
		e := start(t, p, slowUpstream("data: a\n\n", "data: b\n\n"), nil)
		r := e.do(t, "GET", "/", "", nil)
		if r.err == nil && r.body == "data: a\n\ndata: b\n\n" {
			t.Errorf("got the whole body %q without an error; want the connection aborted", r.body)
		}
		e.entry(t)
	})
}

func immediateReply(ir *extprocv3.ImmediateResponse) *extprocv3.ProcessingResponse {
	return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ImmediateResponse{ImmediateResponse: ir}}
}

// Immediate responses (ext_proc.cc, sendImmediateResponse).
func TestMust12ImmediateResponse(t *testing.T) {
	tests := []struct {
		name       string
		ir         *extprocv3.ImmediateResponse
		wantStatus int
		wantType   string
	}{
		{"status below 200 becomes 200", &extprocv3.ImmediateResponse{Status: &typev3.HttpStatus{Code: 100}, Body: []byte("x")}, 200, "text/plain"},
		{"missing status becomes 200", &extprocv3.ImmediateResponse{}, 200, ""},
		{"own content-type kept", &extprocv3.ImmediateResponse{Status: &typev3.HttpStatus{Code: 401}, Body: []byte(`{}`),
			Headers: &extprocv3.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{setHeader("content-type", "application/json")}}}, 401, "application/json"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &stubProc{reply: func(req *extprocv3.ProcessingRequest) *extprocv3.ProcessingResponse { return immediateReply(tt.ir) }}
			up := &upstreamRecorder{}
			e := start(t, p, up, nil)
			r := e.do(t, "GET", "/", "", nil)
			e.entry(t)
			if r.status != tt.wantStatus || r.header.Get("Content-Type") != tt.wantType || r.header.Get("Content-Length") != itoa(len(tt.ir.Body)) {
				t.Errorf("response %d %v", r.status, r.header)
			}
			if len(p.messages()) != 1 || up.count() != 0 {
				t.Errorf("%d messages, %d upstream calls; want no more processing", len(p.messages()), up.count())
			}
		})
	}
	t.Run("in the response phase it replaces the upstream response", func(t *testing.T) {
		p := &stubProc{reply: func(req *extprocv3.ProcessingRequest) *extprocv3.ProcessingResponse {
			if req.GetResponseHeaders() != nil {
				return immediateReply(&extprocv3.ImmediateResponse{Status: &typev3.HttpStatus{Code: 502}, Body: []byte("replaced")})
			}
			return nil
		}}
		e := start(t, p, nil, nil)
		if r := e.do(t, "GET", "/", "", nil); r.status != 502 || r.body != "replaced" {
			t.Errorf("response = %d %q", r.status, r.body)
		}
		e.entry(t)
	})
}

func itoa(n int) string { return strconv.Itoa(n) }

// mode_override.
func TestMust13ModeOverride(t *testing.T) {
	override := func(o *filterv3.ProcessingMode) func(*extprocv3.ProcessingRequest) *extprocv3.ProcessingResponse {
		return func(req *extprocv3.ProcessingRequest) *extprocv3.ProcessingResponse {
			if req.GetResponseHeaders() != nil {
				r := defaultReply(req)
				r.ModeOverride = o
				return r
			}
			return nil
		}
	}
	count := func(p *stubProc) int { return len(chunks(p)) }
	t.Run("STREAMED honoured", func(t *testing.T) {
		p := &stubProc{reply: override(&filterv3.ProcessingMode{ResponseBodyMode: filterv3.ProcessingMode_STREAMED})}
		e := start(t, p, slowUpstream("data: a\n\n", "data: b\n\n"), nil)
		e.do(t, "GET", "/", "", nil)
		e.entry(t)
		cs := chunks(p)
		if last := cs[len(cs)-1]; len(cs) != 3 || len(last.Body) != 0 || !last.EndOfStream { // two reads, then the empty end chunk
			t.Errorf("chunks = %v", cs)
		}
	})
	t.Run("unset body mode means NONE", func(t *testing.T) {
		p := &stubProc{reply: override(&filterv3.ProcessingMode{ResponseHeaderMode: filterv3.ProcessingMode_SEND})}
		e := start(t, p, nil, nil)
		if r := e.do(t, "GET", "/", "", nil); r.body != "hello from upstream" || count(p) != 0 {
			t.Errorf("body %q, %d body messages; want none", r.body, count(p))
		}
		e.entry(t)
	})
	t.Run("ignored without allow_mode_override", func(t *testing.T) {
		p := &stubProc{reply: override(&filterv3.ProcessingMode{})}
		e := start(t, p, nil, func(ep *filterv3.ExternalProcessor) { ep.AllowModeOverride = false })
		e.do(t, "GET", "/", "", nil)
		e.entry(t)
		if count(p) != 1 {
			t.Errorf("%d body messages, want the configured BUFFERED one", count(p))
		}
	})
}

func withMetadata(r *extprocv3.ProcessingResponse, ns string, fields map[string]any) *extprocv3.ProcessingResponse {
	inner, _ := structpb.NewStruct(fields)
	r.DynamicMetadata = &structpb.Struct{Fields: map[string]*structpb.Value{ns: structpb.NewStructValue(inner)}}
	return r
}

// Dynamic metadata into receiving namespaces.
func TestMust14DynamicMetadata(t *testing.T) {
	p := &stubProc{reply: func(req *extprocv3.ProcessingRequest) *extprocv3.ProcessingResponse {
		r := defaultReply(req)
		switch {
		case req.GetRequestHeaders() != nil:
			return withMetadata(r, "io.modelgate", map[string]any{"a": 1, "b": "first"})
		case req.GetResponseBody() != nil:
			r = withMetadata(r, "io.modelgate", map[string]any{"b": "last", "tokens": 42})
			r.DynamicMetadata.Fields["other.ns"] = r.DynamicMetadata.Fields["io.modelgate"]
		}
		return r
	}}
	e := start(t, p, nil, nil)
	e.do(t, "GET", "/", "", nil)
	md := e.entry(t).Metadata
	want := map[string]any{"a": 1.0, "b": "last", "tokens": 42.0}
	if len(md) != 1 || len(md["io.modelgate"]) != 3 || md["io.modelgate"]["b"] != want["b"] || md["io.modelgate"]["tokens"] != want["tokens"] || md["io.modelgate"]["a"] != want["a"] {
		t.Errorf("metadata = %v, want %v merged in io.modelgate only", md, want)
	}
}

// override_message_timeout.
func TestMust15OverrideMessageTimeout(t *testing.T) {
	slowWithExtension := &stubProc{process: func(s extprocv3.ExternalProcessor_ProcessServer) error {
		for {
			req, err := s.Recv()
			if err != nil {
				return nil
			}
			if req.GetRequestHeaders() != nil {
				// A real-looking reply next to the extension must be ignored.
				ext := headersReply(&extprocv3.CommonResponse{HeaderMutation: &extprocv3.HeaderMutation{RemoveHeaders: []string{"x-keep"}}})
				ext.OverrideMessageTimeout = durationpb.New(500 * time.Millisecond)
				s.Send(ext)
				time.Sleep(120 * time.Millisecond)
			}
			s.Send(defaultReply(req))
		}
	}}
	t.Run("honoured with max_message_timeout", func(t *testing.T) {
		up := &upstreamRecorder{}
		e := start(t, slowWithExtension, up, func(ep *filterv3.ExternalProcessor) {
			ep.MessageTimeout, ep.MaxMessageTimeout = ms(60), ms(1000)
		})
		r := e.do(t, "GET", "/", "", map[string]string{"X-Keep": "1"})
		e.entry(t)
		if r.status != 200 || up.count() != 1 || up.reqs[0].Header.Get("X-Keep") != "1" {
			t.Errorf("status %d; want the extension to save the request and its other fields ignored", r.status)
		}
	})
	t.Run("ignored without max_message_timeout", func(t *testing.T) {
		e := start(t, slowWithExtension, nil, func(ep *filterv3.ExternalProcessor) { ep.MessageTimeout = ms(60) })
		if r := e.do(t, "GET", "/", "", nil); r.status != 504 {
			t.Errorf("status = %d, want 504", r.status)
		}
		e.entry(t)
	})
}

// The stand-in's own local replies go through ext_proc's response path (Envoy 1.37+).
func TestMust16LocalRepliesGoThroughResponsePath(t *testing.T) {
	t.Run("404 no route", func(t *testing.T) {
		p := &stubProc{reply: requestHeadersReply(&extprocv3.CommonResponse{})}
		e := start(t, p, nil, func(ep *filterv3.ExternalProcessor) {})
		r := e.do(t, "GET", "/", "", nil)
		e.entry(t)
		msgs := p.messages()
		if r.status != 404 || len(msgs) < 2 || msgs[1].GetResponseHeaders() == nil {
			t.Errorf("status %d, messages %d; want the catch-all 404 sent through response_headers", r.status, len(msgs))
		}
	})
	t.Run("503 upstream connect failure", func(t *testing.T) {
		p := &stubProc{}
		up := &upstreamRecorder{handler: func(w http.ResponseWriter, r *http.Request) {
			panic(http.ErrAbortHandler) // the upstream resets the connection
		}}
		e := start(t, p, up, nil)
		r := e.do(t, "GET", "/", "", nil)
		e.entry(t)
		var sawStatus string
		for _, m := range p.messages() {
			if h := m.GetResponseHeaders(); h != nil {
				sawStatus = string(h.GetHeaders().GetHeaders()[0].GetRawValue())
			}
		}
		if r.status != 503 || sawStatus != "503" {
			t.Errorf("status %d, processor saw %q; want 503 through the response path", r.status, sawStatus)
		}
	})
}

// Large gRPC messages.
func TestMust17LargeMessages(t *testing.T) {
	up := &upstreamRecorder{}
	e := start(t, &stubProc{}, up, func(ep *filterv3.ExternalProcessor) {})
	body := strings.Repeat("x", 900<<10) // near the 1 MiB buffer limit of the test bootstrap
	if r := e.do(t, "POST", "/", body, nil); r.status != 200 || len(up.bodies[0]) != len(body) {
		t.Errorf("status %d", r.status)
	}
	e.entry(t)
}

// The connection manager's stream_idle_timeout is honoured, not ignored:
// with the whole request received it is a 504 (conn_manager_impl.cc,
// onIdleTimeout with maybeRequestTimeoutCode).
func TestStreamIdleTimeout(t *testing.T) {
	up := &upstreamRecorder{handler: func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(2 * time.Second):
		}
	}}
	e := start(t, &stubProc{}, up, nil)
	e.proxyPlanIdle(50 * time.Millisecond)
	if r := e.do(t, "GET", "/", "", nil); r.status != 504 || r.body != "stream timeout" {
		t.Errorf("response = %d %q, want 504 stream timeout", r.status, r.body)
	}
	if en := e.entry(t); en.Details != "stream_idle_timeout" || en.Flags != "SI" {
		t.Errorf("details = %q, flags %q", en.Details, en.Flags)
	}
}
