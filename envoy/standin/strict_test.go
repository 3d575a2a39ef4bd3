package standin

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
)

func kinds(p *stubProc) []string {
	var out []string
	for _, m := range p.messages() {
		switch {
		case m.GetRequestHeaders() != nil:
			out = append(out, "request_headers")
		case m.GetRequestBody() != nil:
			out = append(out, "request_body")
		case m.GetResponseHeaders() != nil:
			out = append(out, "response_headers")
		case m.GetResponseBody() != nil:
			out = append(out, "response_body")
		}
	}
	return out
}

// delayedUpstream answers after d.
func delayedUpstream(d time.Duration) *upstreamRecorder {
	return &upstreamRecorder{handler: func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(d):
		case <-r.Context().Done():
		}
		io.WriteString(w, "late")
	}}
}

// A reply nobody asked for is spurious (ext_proc.cc, onReceiveMessage):
// the request fails at once, or is reset once headers went downstream.
func TestSpuriousReplyWithNothingPending(t *testing.T) {
	twiceToFirstChunk := func(s extprocv3.ExternalProcessor_ProcessServer) error {
		first := true
		for {
			req, err := s.Recv()
			if err != nil {
				return nil
			}
			if b := req.GetResponseBody(); b != nil && first {
				first = false
				s.Send(bodyReplyWith(b.Body))
				s.Send(bodyReplyWith(b.Body)) // nothing is pending: the next chunk comes later
				continue
			}
			s.Send(orDefault(streamedReply(req), req))
		}
	}
	t.Run("after the headers went downstream the stream is reset", func(t *testing.T) {
		up := &upstreamRecorder{handler: func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, "data: a\n\n")
			w.(http.Flusher).Flush()
			select { // the extra reply arrives meanwhile, with nothing pending
			case <-time.After(time.Second):
			case <-r.Context().Done():
				return
			}
			io.WriteString(w, "data: b\n\n")
		}}
		e := start(t, &stubProc{process: twiceToFirstChunk}, up, nil)
		r := e.do(t, "GET", "/", "", nil)
		if r.err == nil || r.body == "data: a\n\ndata: b\n\n" {
			t.Errorf("client got %d %q, err %v; want the stream reset", r.status, r.body, r.err)
		}
		if en := e.entry(t); en.Details != "spurious_message" {
			t.Errorf("details = %q", en.Details)
		}
	})
	twiceToRequestHeaders := func(s extprocv3.ExternalProcessor_ProcessServer, p *stubProc) error {
		for {
			req, err := s.Recv()
			if err != nil {
				return nil
			}
			p.mu.Lock()
			p.got = append(p.got, req)
			p.mu.Unlock()
			s.Send(defaultReply(req))
			if req.GetRequestHeaders() != nil {
				s.Send(defaultReply(req))
			}
		}
	}
	noResponseBody := func(ep *filterv3.ExternalProcessor) {
		ep.ProcessingMode.ResponseBodyMode = filterv3.ProcessingMode_NONE
	}
	t.Run("before the response it fails the request at once", func(t *testing.T) {
		p := &stubProc{}
		p.process = func(s extprocv3.ExternalProcessor_ProcessServer) error { return twiceToRequestHeaders(s, p) }
		e := start(t, p, delayedUpstream(2*time.Second), noResponseBody)
		begin := time.Now()
		r := e.do(t, "GET", "/", "", nil)
		if r.status != 500 || time.Since(begin) > time.Second {
			t.Errorf("status %d after %v; want 500 without waiting for the upstream", r.status, time.Since(begin))
		}
		if en := e.entry(t); en.Details != "spurious_message" {
			t.Errorf("details = %q", en.Details)
		}
		if k := kinds(p); len(k) != 1 {
			t.Errorf("messages %v; want request_headers only (ext_proc's own failure skips the response path)", k)
		}
	})
	t.Run("with failure_mode_allow processing stops and the request goes on", func(t *testing.T) {
		p := &stubProc{}
		p.process = func(s extprocv3.ExternalProcessor_ProcessServer) error { return twiceToRequestHeaders(s, p) }
		e := start(t, p, delayedUpstream(200*time.Millisecond), func(ep *filterv3.ExternalProcessor) {
			noResponseBody(ep)
			ep.FailureModeAllow = true
		})
		r := e.do(t, "GET", "/", "", nil)
		e.entry(t)
		if r.status != 200 || r.body != "late" || len(kinds(p)) != 1 {
			t.Errorf("response %d %q, messages %v; want the upstream response without response_headers", r.status, r.body, kinds(p))
		}
	})
	t.Run("an extra reply after the last streamed chunk is dropped with the closed stream", func(t *testing.T) {
		p := &stubProc{process: func(s extprocv3.ExternalProcessor_ProcessServer) error {
			for {
				req, err := s.Recv()
				if err != nil {
					return nil
				}
				s.Send(orDefault(streamedReply(req), req))
				if b := req.GetResponseBody(); b != nil && b.EndOfStream {
					s.Send(bodyReplyWith(nil))
				}
			}
		}}
		e := start(t, p, slowUpstream("data: a\n\n", "data: b\n\n"), nil)
		if r := e.do(t, "GET", "/", "", nil); r.err != nil || r.body != "data: a\n\ndata: b\n\n" {
			t.Errorf("client got %q, %v; want the whole stream", r.body, r.err)
		}
		e.entry(t)
	})
}

// Envoy removes content-length right after sending the headers, with the
// modes in force then (ext_proc.cc, encodeHeaders; processor_state.h,
// shouldRemoveContentLength).
func TestContentLengthAndModeOverride(t *testing.T) {
	overrideWith := func(mut *extprocv3.HeaderMutation) func(*extprocv3.ProcessingRequest) *extprocv3.ProcessingResponse {
		return func(req *extprocv3.ProcessingRequest) *extprocv3.ProcessingResponse {
			r := streamedReply(req)
			if r != nil {
				r.GetResponseHeaders().Response = &extprocv3.CommonResponse{HeaderMutation: mut}
			}
			return r
		}
	}
	t.Run("the server may remove it in the reply that switches to STREAMED", func(t *testing.T) {
		e := start(t, &stubProc{reply: overrideWith(&extprocv3.HeaderMutation{RemoveHeaders: []string{"content-length"}})}, nil, nil)
		r := e.do(t, "GET", "/", "", nil)
		if r.header.Get("Content-Length") != "" || r.body != "hello from upstream" {
			t.Errorf("content-length %q body %q", r.header.Get("Content-Length"), r.body)
		}
		e.entry(t)
	})
	t.Run("a configured STREAMED mode strips it before the server sees the reply", func(t *testing.T) {
		p := &stubProc{}
		e := start(t, p, nil, func(ep *filterv3.ExternalProcessor) {
			ep.ProcessingMode.ResponseBodyMode = filterv3.ProcessingMode_STREAMED
		})
		r := e.do(t, "GET", "/", "", nil)
		e.entry(t)
		sawLength := false
		for _, m := range p.messages() {
			for _, h := range m.GetResponseHeaders().GetHeaders().GetHeaders() {
				sawLength = sawLength || h.GetKey() == "content-length"
			}
		}
		if r.header.Get("Content-Length") != "" || !sawLength || r.body != "hello from upstream" {
			t.Errorf("client content-length %q, processor saw it: %v, body %q", r.header.Get("Content-Length"), sawLength, r.body)
		}
	})
	t.Run("a kept length that the streamed body no longer matches breaks the response", func(t *testing.T) {
		p := &stubProc{reply: func(req *extprocv3.ProcessingRequest) *extprocv3.ProcessingResponse {
			if b := req.GetResponseBody(); b != nil {
				return bodyReplyWith(append(b.Body, b.Body...))
			}
			return streamedReply(req)
		}}
		e := start(t, p, nil, nil)
		if r := e.do(t, "GET", "/", "", nil); r.err == nil && r.body != "hello from upstream" {
			t.Errorf("client got %q with content-length %q", r.body, r.header.Get("Content-Length"))
		}
		e.entry(t)
	})
}

// The upstream gets the content-length that is in the headers, as Envoy
// forwards it (ext_proc does not recompute it).
func TestUpstreamContentLengthIsForwarded(t *testing.T) {
	setLength := func(n string) *extprocv3.CommonResponse {
		return &extprocv3.CommonResponse{HeaderMutation: &extprocv3.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{setHeader("content-length", n)}}}
	}
	t.Run("BUFFERED: a wrong length without a body mutation is not checked", func(t *testing.T) {
		up := &upstreamRecorder{}
		e := start(t, &stubProc{reply: requestBodyReply(setLength("3"))}, up, nil)
		r := e.do(t, "POST", "/", "short", map[string]string{"X-Modelgate-Backend": "up"})
		e.entry(t)
		if r.status != 200 || up.count() != 1 || string(up.bodies[0]) != "sho" {
			t.Errorf("status %d, upstream bodies %q; want the 3 declared bytes", r.status, up.bodies)
		}
	})
	t.Run("NONE: the length set in the header reply goes upstream", func(t *testing.T) {
		up := &upstreamRecorder{}
		c := setLength("2")
		c.HeaderMutation.SetHeaders = append(c.HeaderMutation.SetHeaders, setHeader("x-modelgate-backend", "up"))
		c.ClearRouteCache = true
		e := start(t, &stubProc{reply: requestHeadersReply(c)}, up, func(ep *filterv3.ExternalProcessor) {
			ep.ProcessingMode.RequestBodyMode = filterv3.ProcessingMode_NONE
		})
		e.do(t, "POST", "/", "abc", nil)
		e.entry(t)
		if up.count() != 1 || string(up.bodies[0]) != "ab" {
			t.Errorf("upstream bodies %q", up.bodies)
		}
	})
	t.Run("a longer length leaves the upstream waiting", func(t *testing.T) {
		e := startWith(t, &stubProc{reply: requestBodyReply(setLength("100"))}, nil, setup{hcm: editRoute("up", func(r *routev3.Route) {
			r.GetRoute().Timeout = ms(300)
		})})
		r := e.do(t, "POST", "/", "short", map[string]string{"X-Modelgate-Backend": "up"})
		if en := e.entry(t); r.status != 504 || en.Details != "response_timeout" {
			t.Errorf("status %d details %q; want the route timeout", r.status, en.Details)
		}
	})
}

// Modes the stand-in does not implement are refused per request, loudly.
func TestUnimplementedModesAreRefused(t *testing.T) {
	tests := []struct {
		name     string
		override *filterv3.ProcessingMode
		request  bool
		want     string
	}{
		{"BUFFERED_PARTIAL response", &filterv3.ProcessingMode{ResponseBodyMode: filterv3.ProcessingMode_BUFFERED_PARTIAL}, false, "standin_unimplemented{response_body_mode_BUFFERED_PARTIAL}"},
		{"FULL_DUPLEX_STREAMED response", &filterv3.ProcessingMode{ResponseBodyMode: filterv3.ProcessingMode_FULL_DUPLEX_STREAMED}, false, "standin_unimplemented{response_body_mode_FULL_DUPLEX_STREAMED}"},
		{"STREAMED request", &filterv3.ProcessingMode{RequestBodyMode: filterv3.ProcessingMode_STREAMED, ResponseBodyMode: filterv3.ProcessingMode_BUFFERED}, true, "standin_unimplemented{request_body_mode_STREAMED}"},
		{"trailers", &filterv3.ProcessingMode{ResponseTrailerMode: filterv3.ProcessingMode_SEND}, false, "standin_unimplemented{mode_override_response_trailer_mode_SEND}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			up := &upstreamRecorder{}
			p := &stubProc{reply: func(req *extprocv3.ProcessingRequest) *extprocv3.ProcessingResponse {
				if tt.request && req.GetRequestHeaders() != nil || !tt.request && req.GetResponseHeaders() != nil {
					r := defaultReply(req)
					r.ModeOverride = tt.override
					return r
				}
				return nil
			}}
			e := start(t, p, up, nil)
			r := e.do(t, "POST", "/", "body", nil)
			if en := e.entry(t); r.status != 500 || en.Details != tt.want {
				t.Errorf("status %d details %q, want 500 %q", r.status, en.Details, tt.want)
			}
			if tt.request && up.count() != 0 {
				t.Error("the request went upstream")
			}
		})
	}
}

// rawUpstream answers with raw bytes on the connection, then closes it.
func rawUpstream(parts ...string) *upstreamRecorder {
	return &upstreamRecorder{handler: func(w http.ResponseWriter, r *http.Request) {
		conn, buf, err := http.NewResponseController(w).Hijack()
		if err != nil {
			panic(err)
		}
		defer conn.Close()
		for _, p := range parts {
			buf.WriteString(p)
			buf.Flush()
			time.Sleep(50 * time.Millisecond)
		}
	}}
}

// An upstream reset never reaches the client as a clean response (router.cc,
// onUpstreamReset and onUpstreamAbort; filter_manager.cc, sendLocalReply).
func TestUpstreamResets(t *testing.T) {
	t.Run("before headers: 503 connection termination", func(t *testing.T) {
		e := start(t, &stubProc{}, rawUpstream(), nil)
		r := e.do(t, "GET", "/", "", nil)
		en := e.entry(t)
		if r.status != 503 || r.body != "upstream connect error or disconnect/reset before headers. reset reason: connection termination" ||
			en.Details != "upstream_reset_before_response_started{connection_termination}" || en.Flags != "UC" {
			t.Errorf("response %d %q, details %q flags %q", r.status, r.body, en.Details, en.Flags)
		}
	})
	t.Run("mid-body with BUFFERED headers held: a direct 502, no clean 200", func(t *testing.T) {
		p := &stubProc{}
		e := start(t, p, rawUpstream("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nabc"), nil)
		r := e.do(t, "GET", "/", "", nil)
		en := e.entry(t)
		if r.status != 502 || !strings.HasSuffix(r.body, "reset reason: protocol error") ||
			en.Details != "upstream_reset_after_response_started{protocol_error}" || en.Flags != "UPE" {
			t.Errorf("response %d %q, details %q flags %q", r.status, r.body, en.Details, en.Flags)
		}
		if k := kinds(p); strings.Join(k, ",") != "request_headers,response_headers" {
			t.Errorf("messages %v: the reply must go straight to the client", k)
		}
	})
	t.Run("mid-stream after headers went out: the client sees a reset", func(t *testing.T) {
		up := rawUpstream("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Type: text/event-stream\r\n\r\n9\r\ndata: a\n\n\r\n")
		e := start(t, &stubProc{reply: streamedReply}, up, nil)
		r := e.do(t, "GET", "/", "", nil)
		if r.err == nil || r.status != 200 || r.body != "data: a\n\n" {
			t.Errorf("client got %d %q, err %v; want the first event, then a reset", r.status, r.body, r.err)
		}
		e.entry(t)
	})
	t.Run("connect failure: 503 remote connection failure", func(t *testing.T) {
		l, _ := net.Listen("tcp", "127.0.0.1:0")
		closed := l.Addr().String()
		l.Close()
		e := startWith(t, &stubProc{}, nil, setup{hcm: func(hcm *hcmv3.HttpConnectionManager) {}}, withUpstreamAddr(closed))
		r := e.do(t, "GET", "/", "", nil)
		en := e.entry(t)
		if r.status != 503 || r.body != "upstream connect error or disconnect/reset before headers. reset reason: remote connection failure, transport failure reason: delayed connect error: Connection refused" ||
			en.Details != "upstream_reset_before_response_started{remote_connection_failure|delayed_connect_error:_Connection_refused}" || en.Flags != "UF" {
			t.Errorf("response %d %q, details %q flags %q", r.status, r.body, en.Details, en.Flags)
		}
	})
}

// withUpstreamAddr points the cluster "up" somewhere else.
func withUpstreamAddr(addr string) Option {
	return func(p *Proxy) { p.plan.clusters["up"].lb.hosts[0].addr = addr }
}

// Messages over gRPC's default 4 MiB limit pass in both directions.
func TestLargeMessagesBothWays(t *testing.T) {
	big := bytes.Repeat([]byte("x"), 5<<20)
	bigger := bytes.Repeat([]byte("y"), 5<<20+7)
	up := &upstreamRecorder{handler: func(w http.ResponseWriter, r *http.Request) { w.Write(big) }}
	p := &stubProc{reply: func(req *extprocv3.ProcessingRequest) *extprocv3.ProcessingResponse {
		switch {
		case req.GetRequestBody() != nil:
			return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestBody{RequestBody: &extprocv3.BodyResponse{
				Response: &extprocv3.CommonResponse{BodyMutation: newBody(string(bigger)), HeaderMutation: &extprocv3.HeaderMutation{
					SetHeaders: []*corev3.HeaderValueOption{setHeader("content-length", itoa(len(bigger)))}}}}}}
		case req.GetResponseBody() != nil:
			return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseBody{ResponseBody: &extprocv3.BodyResponse{
				Response: &extprocv3.CommonResponse{BodyMutation: newBody(string(bigger)), HeaderMutation: &extprocv3.HeaderMutation{
					SetHeaders: []*corev3.HeaderValueOption{setHeader("content-length", itoa(len(bigger)))}}}}}}
		}
		return nil
	}}
	e := startWith(t, p, up, setup{bufferLimit: 16 << 20})
	r := e.do(t, "POST", "/", string(big), nil)
	e.entry(t)
	if r.status != 200 || r.body != string(bigger) || up.count() != 1 || len(up.bodies[0]) != len(bigger) {
		t.Errorf("status %d, client body %d bytes, upstream body %d bytes", r.status, len(r.body), len(up.bodies[0]))
	}
	var sent int
	for _, m := range p.messages() {
		sent = max(sent, len(m.GetRequestBody().GetBody()), len(m.GetResponseBody().GetBody()))
	}
	if sent <= 4<<20 {
		t.Errorf("largest message %d bytes, want over 4 MiB", sent)
	}
}

// rawRequest writes req on a new connection to the stand-in, keeps it
// open, and returns the response it gets.
func rawRequest(t *testing.T, url, req string) (*http.Response, string) {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	io.WriteString(conn, req)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	return resp, string(body)
}
