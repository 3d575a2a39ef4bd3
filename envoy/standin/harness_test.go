package standin

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"

	"modelgate/envoy"
)

// stubProc is an ExternalProcessor made of a function: reply answers each
// message (nil means the default reply); Process can be replaced whole.
type stubProc struct {
	extprocv3.UnimplementedExternalProcessorServer
	reply   func(req *extprocv3.ProcessingRequest) *extprocv3.ProcessingResponse
	process func(extprocv3.ExternalProcessor_ProcessServer) error

	mu      sync.Mutex
	got     []*extprocv3.ProcessingRequest
	streams int
	ends    []error // how each stream ended, as Recv saw it
}

func (p *stubProc) Process(s extprocv3.ExternalProcessor_ProcessServer) error {
	p.mu.Lock()
	p.streams++
	p.mu.Unlock()
	if p.process != nil {
		return p.process(s)
	}
	for {
		req, err := s.Recv()
		if err != nil {
			p.mu.Lock()
			p.ends = append(p.ends, err)
			p.mu.Unlock()
			return nil
		}
		p.mu.Lock()
		p.got = append(p.got, req)
		p.mu.Unlock()
		var resp *extprocv3.ProcessingResponse
		if p.reply != nil {
			resp = p.reply(req)
		}
		if resp == nil {
			resp = defaultReply(req)
		}
		if err := s.Send(resp); err != nil {
			return nil
		}
	}
}

func (p *stubProc) messages() []*extprocv3.ProcessingRequest {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]*extprocv3.ProcessingRequest(nil), p.got...)
}

// route is the mutation that sends a request to the test backend.
func route() *extprocv3.HeaderMutation {
	return &extprocv3.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{{Header: &corev3.HeaderValue{Key: "x-modelgate-backend", RawValue: []byte("up")}}}}
}

// defaultReply routes to the backend in the request-headers reply and
// continues everything else unchanged.
func defaultReply(req *extprocv3.ProcessingRequest) *extprocv3.ProcessingResponse {
	switch req.GetRequest().(type) {
	case *extprocv3.ProcessingRequest_RequestHeaders:
		return headersReply(&extprocv3.CommonResponse{HeaderMutation: route(), ClearRouteCache: true})
	case *extprocv3.ProcessingRequest_RequestBody:
		return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestBody{RequestBody: &extprocv3.BodyResponse{}}}
	case *extprocv3.ProcessingRequest_ResponseHeaders:
		return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseHeaders{ResponseHeaders: &extprocv3.HeadersResponse{}}}
	}
	return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseBody{ResponseBody: &extprocv3.BodyResponse{}}}
}

func headersReply(c *extprocv3.CommonResponse) *extprocv3.ProcessingResponse {
	return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestHeaders{RequestHeaders: &extprocv3.HeadersResponse{Response: c}}}
}

func bodyReplyWith(body []byte) *extprocv3.ProcessingResponse {
	return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseBody{ResponseBody: &extprocv3.BodyResponse{
		Response: &extprocv3.CommonResponse{BodyMutation: &extprocv3.BodyMutation{Mutation: &extprocv3.BodyMutation_Body{Body: body}}}}}}
}

func setHeader(k, v string) *corev3.HeaderValueOption {
	return &corev3.HeaderValueOption{Header: &corev3.HeaderValue{Key: k, RawValue: []byte(v)}}
}

// upstreamRecorder is a backend that remembers what it got.
type upstreamRecorder struct {
	mu      sync.Mutex
	reqs    []*http.Request
	bodies  [][]byte
	handler http.HandlerFunc
}

func (u *upstreamRecorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	u.mu.Lock()
	u.reqs = append(u.reqs, r)
	u.bodies = append(u.bodies, body)
	u.mu.Unlock()
	if u.handler != nil {
		u.handler(w, r)
		return
	}
	w.Header().Set("Content-Type", "text/plain")
	io.WriteString(w, "hello from upstream")
}

func (u *upstreamRecorder) count() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.reqs)
}

type env struct {
	url   string
	logs  chan Entry
	up    *upstreamRecorder
	proxy *Proxy
}

// proxyPlanIdle sets the stream idle timeout as if the bootstrap had it.
func (e *env) proxyPlanIdle(d time.Duration) { e.proxy.plan.idleTimeout = d }

// start runs p behind a stand-in built from the generated bootstrap, with
// edit applied to the ext_proc filter config.
func start(t *testing.T, p *stubProc, up *upstreamRecorder, edit func(*filterv3.ExternalProcessor), opts ...Option) *env {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer(grpc.MaxRecvMsgSize(64 << 20))
	extprocv3.RegisterExternalProcessorServer(gs, p)
	go gs.Serve(l)
	t.Cleanup(gs.Stop)
	if up == nil {
		up = &upstreamRecorder{}
	}
	upSrv := httptest.NewServer(up)
	t.Cleanup(upSrv.Close)
	b, err := envoy.Bootstrap(envoy.Config{Listen: "127.0.0.1:0", ExtProcAddress: l.Addr().String(),
		BufferLimitBytes: 1 << 20, Backends: []envoy.Backend{{Name: "up", BaseURL: upSrv.URL}}})
	if err != nil {
		t.Fatal(err)
	}
	editExtProc(t, b, edit)
	e := &env{logs: make(chan Entry, 100), up: up}
	proxy, err := New(b, append([]Option{WithAccessLog(func(en Entry) { e.logs <- en })}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(proxy)
	t.Cleanup(func() { srv.Close(); proxy.Close() })
	e.url, e.proxy = srv.URL, proxy
	return e
}

func editExtProc(t *testing.T, b *bootstrapv3.Bootstrap, edit func(*filterv3.ExternalProcessor)) {
	t.Helper()
	if edit == nil {
		return
	}
	f := b.StaticResources.Listeners[0].FilterChains[0].Filters[0]
	hcm := &hcmv3.HttpConnectionManager{}
	f.GetTypedConfig().UnmarshalTo(hcm)
	ep := &filterv3.ExternalProcessor{}
	hcm.HttpFilters[0].GetTypedConfig().UnmarshalTo(ep)
	edit(ep)
	a, _ := anypb.New(ep)
	hcm.HttpFilters[0].ConfigType = &hcmv3.HttpFilter_TypedConfig{TypedConfig: a}
	a2, _ := anypb.New(hcm)
	f.ConfigType = &listenerv3.Filter_TypedConfig{TypedConfig: a2}
}

func ms(n int) *durationpb.Duration { return durationpb.New(time.Duration(n) * time.Millisecond) }

type response struct {
	status int
	header http.Header
	body   string
	err    error
}

func (e *env) do(t *testing.T, method, path, body string, header map[string]string) response {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, e.url+path, rd)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return response{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return response{status: resp.StatusCode, header: resp.Header, body: string(b), err: err}
}

func (e *env) entry(t *testing.T) Entry {
	t.Helper()
	select {
	case en := <-e.logs:
		return en
	case <-time.After(5 * time.Second):
		t.Fatal("no access log entry")
	}
	return Entry{}
}
