package standin

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	upstreamsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
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

// setup adjusts the test bootstrap before the stand-in loads it.
type setup struct {
	extproc     func(*filterv3.ExternalProcessor)
	hcm         func(*hcmv3.HttpConnectionManager)
	bufferLimit uint32 // 0: 1 MiB
	// clusters edits the clusters: the ext_proc cluster, then "up".
	clusters func(extProc, up *clusterv3.Cluster)
}

// start runs p behind a stand-in built from the test bootstrap, with edit
// applied to the ext_proc filter config.
func start(t *testing.T, p *stubProc, up *upstreamRecorder, edit func(*filterv3.ExternalProcessor), opts ...Option) *env {
	t.Helper()
	return startWith(t, p, up, setup{extproc: edit}, opts...)
}

func startWith(t *testing.T, p *stubProc, up *upstreamRecorder, s setup, opts ...Option) *env {
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
	b := testBootstrap(t, l.Addr().String(), upSrv.Listener.Addr().String(), s)
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

// testBootstrap is what the gateway's generator emits, built here so that
// these tests do not follow its changes: a listener running ext_proc
// (BUFFERED both ways, mode override allowed, fail closed) then the
// router; a route to the backend "up" chosen by x-modelgate-backend and a
// 404 direct-response catch-all; the ext_proc cluster over HTTP/2.
func testBootstrap(t *testing.T, extProcAddr, upAddr string, s setup) *bootstrapv3.Bootstrap {
	t.Helper()
	limit := s.bufferLimit
	if limit == 0 {
		limit = 1 << 20
	}
	ep := &filterv3.ExternalProcessor{
		GrpcService: &corev3.GrpcService{TargetSpecifier: &corev3.GrpcService_EnvoyGrpc_{
			EnvoyGrpc: &corev3.GrpcService_EnvoyGrpc{ClusterName: "modelgate_extproc"}}},
		ProcessingMode: &filterv3.ProcessingMode{
			RequestHeaderMode: filterv3.ProcessingMode_SEND, RequestBodyMode: filterv3.ProcessingMode_BUFFERED,
			RequestTrailerMode: filterv3.ProcessingMode_SKIP, ResponseHeaderMode: filterv3.ProcessingMode_SEND,
			ResponseBodyMode: filterv3.ProcessingMode_BUFFERED, ResponseTrailerMode: filterv3.ProcessingMode_SKIP,
		},
		AllowModeOverride: true,
		MessageTimeout:    durationpb.New(10 * time.Second),
		MetadataOptions: &filterv3.MetadataOptions{ReceivingNamespaces: &filterv3.MetadataOptions_MetadataNamespaces{
			Untyped: []string{"io.modelgate"}}},
	}
	if s.extproc != nil {
		s.extproc(ep)
	}
	upHost, upPort := splitHostPort(t, upAddr)
	hcm := &hcmv3.HttpConnectionManager{
		StatPrefix:        "modelgate",
		StreamIdleTimeout: durationpb.New(300 * time.Second),
		RequestTimeout:    durationpb.New(0),
		RouteSpecifier: &hcmv3.HttpConnectionManager_RouteConfig{RouteConfig: &routev3.RouteConfiguration{
			Name: "modelgate", VirtualHosts: []*routev3.VirtualHost{{Name: "modelgate", Domains: []string{"*"}, Routes: []*routev3.Route{
				{
					Name: "up",
					Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"},
						Headers: []*routev3.HeaderMatcher{{Name: "x-modelgate-backend", HeaderMatchSpecifier: &routev3.HeaderMatcher_StringMatch{
							StringMatch: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: "up"}}}}}},
					Action: &routev3.Route_Route{Route: &routev3.RouteAction{
						ClusterSpecifier:     &routev3.RouteAction_Cluster{Cluster: "up"},
						Timeout:              durationpb.New(0),
						HostRewriteSpecifier: &routev3.RouteAction_HostRewriteLiteral{HostRewriteLiteral: upAddr},
					}},
				},
				{
					Name:  "not_found",
					Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}},
					Action: &routev3.Route_DirectResponse{DirectResponse: &routev3.DirectResponseAction{Status: 404,
						Body: &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: notFoundBody}}}},
					ResponseHeadersToAdd: []*corev3.HeaderValueOption{{
						Header:       &corev3.HeaderValue{Key: "content-type", Value: "application/json"},
						AppendAction: corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD}},
				},
			}}},
		}},
		HttpFilters: []*hcmv3.HttpFilter{
			{Name: "envoy.filters.http.ext_proc", ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAny(t, ep)}},
			{Name: "envoy.filters.http.router", ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAny(t, &routerv3.Router{SuppressEnvoyHeaders: true})}},
		},
	}
	if s.hcm != nil {
		s.hcm(hcm)
	}
	epHost, epPort := splitHostPort(t, extProcAddr)
	b := &bootstrapv3.Bootstrap{StaticResources: &bootstrapv3.Bootstrap_StaticResources{
		Listeners: []*listenerv3.Listener{{
			Name:                          "modelgate",
			Address:                       socketAddress("127.0.0.1", 0),
			PerConnectionBufferLimitBytes: wrapperspb.UInt32(limit),
			FilterChains: []*listenerv3.FilterChain{{Filters: []*listenerv3.Filter{{
				Name: "envoy.filters.network.http_connection_manager", ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: mustAny(t, hcm)}}}}},
		}},
		Clusters: []*clusterv3.Cluster{
			{
				Name: "modelgate_extproc", ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC},
				LoadAssignment: loadAssignment("modelgate_extproc", epHost, epPort),
				TypedExtensionProtocolOptions: map[string]*anypb.Any{"envoy.extensions.upstreams.http.v3.HttpProtocolOptions": mustAny(t, &upstreamsv3.HttpProtocolOptions{
					UpstreamProtocolOptions: &upstreamsv3.HttpProtocolOptions_ExplicitHttpConfig_{ExplicitHttpConfig: &upstreamsv3.HttpProtocolOptions_ExplicitHttpConfig{
						ProtocolConfig: &upstreamsv3.HttpProtocolOptions_ExplicitHttpConfig_Http2ProtocolOptions{Http2ProtocolOptions: &corev3.Http2ProtocolOptions{}}}}})},
			},
			{Name: "up", ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC}, LoadAssignment: loadAssignment("up", upHost, upPort)},
		},
	}}
	if s.clusters != nil {
		s.clusters(b.StaticResources.Clusters[0], b.StaticResources.Clusters[1])
	}
	return b
}

const notFoundBody = `{"error":{"message":"Unknown request URL.","type":"invalid_request_error","param":null,"code":"unknown_url"}}`

func mustAny(t *testing.T, m proto.Message) *anypb.Any {
	t.Helper()
	a, err := anypb.New(m)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func splitHostPort(t *testing.T, addr string) (string, uint32) {
	t.Helper()
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.Atoi(port)
	return host, uint32(n)
}

func socketAddress(host string, port uint32) *corev3.Address {
	return &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
		Address: host, PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: port}}}}
}

func loadAssignment(name, host string, port uint32) *endpointv3.ClusterLoadAssignment {
	return &endpointv3.ClusterLoadAssignment{ClusterName: name, Endpoints: []*endpointv3.LocalityLbEndpoints{{
		LbEndpoints: []*endpointv3.LbEndpoint{{HostIdentifier: &endpointv3.LbEndpoint_Endpoint{
			Endpoint: &endpointv3.Endpoint{Address: socketAddress(host, port)}}}}}}}
}

// offlineBootstrap is the test bootstrap for configuration tests, with
// nothing listening.
func offlineBootstrap(t *testing.T, s setup) *bootstrapv3.Bootstrap {
	t.Helper()
	return testBootstrap(t, "127.0.0.1:1", "127.0.0.1:2", s)
}

// editRoute changes the route named name in the test bootstrap's HCM.
func editRoute(name string, edit func(*routev3.Route)) func(*hcmv3.HttpConnectionManager) {
	return func(hcm *hcmv3.HttpConnectionManager) {
		for _, vh := range hcm.GetRouteConfig().GetVirtualHosts() {
			for _, r := range vh.GetRoutes() {
				if r.GetName() == name {
					edit(r)
				}
			}
		}
	}
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
