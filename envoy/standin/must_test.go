package standin

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

func headerKeys(h *corev3.HeaderMap) []string {
	var out []string
	for _, v := range h.GetHeaders() {
		out = append(out, v.GetKey())
	}
	return out
}

// Stream handling: one stream per request, opened lazily, protocol_config first, raw_value headers.
func TestMust01StreamHandling(t *testing.T) {
	p := &stubProc{}
	e := start(t, p, nil, nil)
	for range 2 {
		if r := e.do(t, "GET", "/x", "", nil); r.status != 200 {
			t.Fatalf("status %d %v", r.status, r.err)
		}
		e.entry(t)
	}
	msgs := p.messages()
	ends := 0
	eventually(t, func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		ends = len(p.ends)
		return ends == 2
	})
	p.mu.Lock()
	streams := p.streams
	p.mu.Unlock()
	if streams != 2 {
		t.Errorf("streams = %d, want one per request", streams)
	}
	if ends != 2 {
		t.Errorf("%d streams ended, want both closed after their exchange", ends)
	}
	for i, m := range msgs {
		first := i%3 == 0 // request headers, response headers, response body per request
		if (m.GetProtocolConfig() != nil) != first || m.GetMetadataContext() == nil {
			t.Errorf("message %d: protocol_config %v, metadata_context %v; want protocol_config only on the first", i, m.GetProtocolConfig(), m.GetMetadataContext())
		}
	}
	for _, h := range msgs[0].GetRequestHeaders().GetHeaders().GetHeaders() {
		if h.GetValue() != "" || h.GetRawValue() == nil {
			t.Errorf("header %s: value %q raw %q; want raw_value only", h.GetKey(), h.GetValue(), h.GetRawValue())
		}
	}
}

// Header messages as Envoy's ext_proc builds them.
func TestMust02HeaderMessageContent(t *testing.T) {
	p := &stubProc{}
	e := start(t, p, nil, nil)
	req, _ := http.NewRequest("POST", e.url+"/v1/x?q=1", strings.NewReader("body"))
	req.Header.Add("X-Multi", "a")
	req.Header.Add("X-Multi", "b")
	req.Header.Set("Keep-Alive", "timeout=5")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	e.entry(t)
	msgs := p.messages()
	rh := msgs[0].GetRequestHeaders()
	keys := headerKeys(rh.GetHeaders())
	if strings.Join(keys[:6], ",") != ":authority,:path,:method,:scheme,x-forwarded-proto,x-request-id" {
		t.Errorf("header order = %v", keys)
	}
	multi := 0
	for _, h := range rh.GetHeaders().GetHeaders() {
		if h.GetKey() != strings.ToLower(h.GetKey()) || h.GetKey() == "keep-alive" {
			t.Errorf("header %q: want lower-case, no hop-by-hop", h.GetKey())
		}
		if h.GetKey() == ":path" && string(h.GetRawValue()) != "/v1/x?q=1" {
			t.Errorf(":path = %q, want the query kept", h.GetRawValue())
		}
		if h.GetKey() == "x-multi" {
			multi++
		}
	}
	if multi != 2 || rh.GetEndOfStream() {
		t.Errorf("x-multi entries %d (want 2), end_of_stream %v (want false with a body)", multi, rh.GetEndOfStream())
	}
	respH := msgs[2].GetResponseHeaders()
	if keys := headerKeys(respH.GetHeaders()); keys[0] != ":status" || !contains(keys, "content-length") {
		t.Errorf("response header keys = %v, want :status first and content-length", keys)
	}
	e.do(t, "GET", "/", "", nil)
	e.entry(t)
	if !p.messages()[len(msgs)].GetRequestHeaders().GetEndOfStream() {
		t.Error("GET: end_of_stream false, want true")
	}
}

// eventually polls cond for up to two seconds.
func eventually(t *testing.T, cond func() bool) {
	t.Helper()
	for range 200 {
		if cond() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// Processing modes as configured.
func TestMust03ConfigurableModes(t *testing.T) {
	p := &stubProc{reply: func(req *extprocv3.ProcessingRequest) *extprocv3.ProcessingResponse {
		if req.GetRequestBody() != nil { // route from the body reply, as modelgate does
			return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestBody{RequestBody: &extprocv3.BodyResponse{
				Response: &extprocv3.CommonResponse{HeaderMutation: route(), ClearRouteCache: true}}}}
		}
		return nil
	}}
	e := start(t, p, nil, func(ep *filterv3.ExternalProcessor) {
		ep.ProcessingMode.RequestHeaderMode = filterv3.ProcessingMode_SKIP
		ep.ProcessingMode.ResponseBodyMode = filterv3.ProcessingMode_NONE
	})
	r := e.do(t, "POST", "/", "abc", nil)
	e.entry(t)
	var kinds []string
	for _, m := range p.messages() {
		kinds = append(kinds, strings.TrimPrefix(strings.Split(m.String(), ":")[0], " "))
	}
	// Headers SKIP: the body reply's header mutation is ignored (no held
	// headers), so the request stays on the catch-all route.
	if r.status != 404 || len(p.messages()) != 2 || p.messages()[0].GetRequestBody() == nil || p.messages()[1].GetResponseHeaders() == nil {
		t.Errorf("status %d, messages %v; want request_body then response_headers only and no re-route", r.status, kinds)
	}
	if _, err := New(bootstrapWithModes(t, filterv3.ProcessingMode_STREAMED, filterv3.ProcessingMode_SKIP)); err == nil {
		t.Error("STREAMED request bodies are not implemented and must be refused")
	}
	if _, err := New(bootstrapWithModes(t, filterv3.ProcessingMode_BUFFERED, filterv3.ProcessingMode_SEND)); err == nil {
		t.Error("trailer processing is not implemented and must be refused")
	}
}

// BUFFERED bodies and the buffer limit (413/500).
func TestMust04Buffered(t *testing.T) {
	up := &upstreamRecorder{handler: func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/big" {
			w.Write(bytes.Repeat([]byte("x"), 2<<20))
			return
		}
		io.WriteString(w, "ok")
	}}
	p := &stubProc{}
	e := start(t, p, up, nil)
	e.do(t, "POST", "/", "a body", nil)
	e.entry(t)
	var bodies []*extprocv3.HttpBody
	for _, m := range p.messages() {
		if b := m.GetRequestBody(); b != nil {
			bodies = append(bodies, b)
		}
	}
	if len(bodies) != 1 || string(bodies[0].Body) != "a body" || !bodies[0].EndOfStream {
		t.Errorf("request body messages = %v, want one whole body with end_of_stream", bodies)
	}
	if r := e.do(t, "POST", "/", strings.Repeat("x", 1<<20+1), nil); r.status != 413 {
		t.Errorf("oversized request: status %d, want 413", r.status)
	}
	if en := e.entry(t); en.Details != "request_payload_too_large" {
		t.Errorf("details = %q", en.Details)
	}
	if r := e.do(t, "GET", "/big", "", nil); r.status != 500 {
		t.Errorf("oversized buffered response: status %d, want 500", r.status)
	}
	e.entry(t)
}

func bootstrapWithModes(t *testing.T, reqBody filterv3.ProcessingMode_BodySendMode, trailers filterv3.ProcessingMode_HeaderSendMode) *bootstrapv3.Bootstrap {
	t.Helper()
	return offlineBootstrap(t, setup{extproc: func(ep *filterv3.ExternalProcessor) {
		ep.ProcessingMode.RequestBodyMode = reqBody
		ep.ProcessingMode.ResponseTrailerMode = trailers
	}})
}

var _ = errors.New
var _ = sync.Mutex{}
var _ = time.Second
var _ = codes.OK
var _ = status.New
var _ = structpb.NewStruct
var _ = wrapperspb.Bool
var _ = typev3.StatusCode_OK

// A client that goes away cancels the ext_proc stream.
func TestMust01ClientDisconnectCancelsStream(t *testing.T) {
	p := &stubProc{}
	up := &upstreamRecorder{handler: func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	}}
	e := start(t, p, up, nil)
	client := &http.Client{Timeout: 100 * time.Millisecond}
	if _, err := client.Get(e.url + "/"); err == nil {
		t.Fatal("the request did not time out")
	}
	start := time.Now()
	eventually(t, func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return len(p.ends) == 1
	})
	p.mu.Lock()
	ended := len(p.ends)
	p.mu.Unlock()
	if ended != 1 || time.Since(start) > 2*time.Second {
		t.Errorf("stream ends = %d after %v; want the stream cancelled when the client left", ended, time.Since(start))
	}
}
