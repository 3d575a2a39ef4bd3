package standin

import (
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	upstreamcodecv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/upstream_codec/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	previoushostsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/retry/host/previous_hosts/v3"
	previousprioritiesv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/retry/priority/previous_priorities/v3"
	upstreamsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// The fallback topology of the contract (issue 14): one cluster per
// model, one LocalityLbEndpoints per deployment with its priority, an
// endpoint hostname and io.modelgate metadata, LEAST_REQUEST, outlier
// detection, panic threshold 0, and an upstream ext_proc before the codec;
// a route on x-modelgate-model with auto_host_rewrite and a retry policy.

const (
	fbCluster = "model_m"
	fbModel   = "m"
	// backendAttr is the attribute path that names the host's backend.
	backendAttr = "xds.upstream_host_metadata.filter_metadata['io.modelgate']['backend']"
)

// deployment is one endpoint of the fallback cluster.
type deployment struct {
	priority uint32
	backend  string
	up       *upstreamRecorder // nil with addr set: nothing listens
	addr     string
}

// fallback describes a test's fallback topology.
type fallback struct {
	deployments []deployment
	retry       *routev3.RetryPolicy        // nil: the contract's
	outlier     *clusterv3.OutlierDetection // nil: the contract's, with a consecutive_5xx that never trips
	panic       *typev3.Percent             // nil: 0 (panic disabled)
	// upstream answers the upstream ext_proc's messages for attempt n
	// (nil reply: upstreamDefault); nil filter: the codec alone.
	upstream   func(n int, req *extprocv3.ProcessingRequest) *extprocv3.ProcessingResponse
	noUpstream bool
	editUp     func(*filterv3.ExternalProcessor)
	cluster    func(*clusterv3.Cluster)
	// router is the router-level stub's reply (nil: route to the model).
	router func(req *extprocv3.ProcessingRequest) *extprocv3.ProcessingResponse
}

// contractRetry is the contract's retry policy.
func contractRetry(t *testing.T) *routev3.RetryPolicy {
	return &routev3.RetryPolicy{
		RetryOn:              "connect-failure,reset,5xx,retriable-status-codes",
		RetriableStatusCodes: []uint32{429},
		NumRetries:           wrapperspb.UInt32(2),
		PerTryTimeout:        durationpb.New(5 * time.Second),
		RetryPriority: &routev3.RetryPolicy_RetryPriority{Name: "envoy.retry_priorities.previous_priorities",
			ConfigType: &routev3.RetryPolicy_RetryPriority_TypedConfig{TypedConfig: mustAny(t, &previousprioritiesv3.PreviousPrioritiesConfig{UpdateFrequency: 1})}},
		RetryHostPredicate: []*routev3.RetryPolicy_RetryHostPredicate{{Name: "envoy.retry_host_predicates.previous_hosts",
			ConfigType: &routev3.RetryPolicy_RetryHostPredicate_TypedConfig{TypedConfig: mustAny(t, &previoushostsv3.PreviousHostsPredicate{})}}},
		HostSelectionRetryMaxAttempts: 3,
		RateLimitedRetryBackOff: &routev3.RetryPolicy_RateLimitedRetryBackOff{
			ResetHeaders: []*routev3.RetryPolicy_ResetHeader{{Name: "retry-after", Format: routev3.RetryPolicy_SECONDS}},
			MaxInterval:  durationpb.New(10 * time.Second)},
	}
}

// contractUpstreamFilter is the contract's upstream ext_proc filter.
func contractUpstreamFilter() *filterv3.ExternalProcessor {
	return &filterv3.ExternalProcessor{
		GrpcService: &corev3.GrpcService{TargetSpecifier: &corev3.GrpcService_EnvoyGrpc_{
			EnvoyGrpc: &corev3.GrpcService_EnvoyGrpc{ClusterName: "modelgate_extproc"}}},
		ProcessingMode: &filterv3.ProcessingMode{
			RequestHeaderMode: filterv3.ProcessingMode_SEND, RequestBodyMode: filterv3.ProcessingMode_BUFFERED,
			ResponseHeaderMode: filterv3.ProcessingMode_SEND, ResponseBodyMode: filterv3.ProcessingMode_NONE,
			RequestTrailerMode: filterv3.ProcessingMode_SKIP, ResponseTrailerMode: filterv3.ProcessingMode_SKIP,
		},
		MessageTimeout:    durationpb.New(5 * time.Second),
		RequestAttributes: []string{"xds.upstream_host_metadata", "upstream.request_attempt_count", backendAttr},
	}
}

func fallbackCluster(t *testing.T, f fallback, addrs []string) *clusterv3.Cluster {
	la := &endpointv3.ClusterLoadAssignment{ClusterName: fbCluster}
	for i, d := range f.deployments {
		host, port := splitHostPort(t, addrs[i])
		la.Endpoints = append(la.Endpoints, &endpointv3.LocalityLbEndpoints{
			Priority: d.priority, LoadBalancingWeight: wrapperspb.UInt32(uint32(10 * (i + 1))),
			LbEndpoints: []*endpointv3.LbEndpoint{{
				HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{
					Address: socketAddress(host, port), Hostname: d.backend + ".example"}},
				Metadata: &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{
					"io.modelgate": {Fields: map[string]*structpb.Value{"backend": structpb.NewStringValue(d.backend)}}}},
			}},
		})
	}
	od := f.outlier
	if od == nil {
		od = &clusterv3.OutlierDetection{Consecutive_5Xx: wrapperspb.UInt32(1000), ConsecutiveGatewayFailure: wrapperspb.UInt32(1000),
			EnforcingConsecutiveGatewayFailure: wrapperspb.UInt32(100), Interval: durationpb.New(time.Second),
			BaseEjectionTime: durationpb.New(30 * time.Second), MaxEjectionPercent: wrapperspb.UInt32(100)}
	}
	panicT := f.panic
	if panicT == nil {
		panicT = &typev3.Percent{Value: 0}
	}
	opts := &upstreamsv3.HttpProtocolOptions{UpstreamProtocolOptions: &upstreamsv3.HttpProtocolOptions_ExplicitHttpConfig_{
		ExplicitHttpConfig: &upstreamsv3.HttpProtocolOptions_ExplicitHttpConfig{
			ProtocolConfig: &upstreamsv3.HttpProtocolOptions_ExplicitHttpConfig_HttpProtocolOptions{HttpProtocolOptions: &corev3.Http1ProtocolOptions{}}}}}
	if !f.noUpstream {
		ep := contractUpstreamFilter()
		if f.editUp != nil {
			f.editUp(ep)
		}
		opts.HttpFilters = []*hcmv3.HttpFilter{
			{Name: "envoy.filters.http.ext_proc", ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAny(t, ep)}},
			{Name: "envoy.filters.http.upstream_codec", ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAny(t, &upstreamcodecv3.UpstreamCodec{})}},
		}
	}
	c := &clusterv3.Cluster{
		Name: fbCluster, ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STRICT_DNS},
		LbPolicy: clusterv3.Cluster_LEAST_REQUEST, LoadAssignment: la, OutlierDetection: od,
		CommonLbConfig:                &clusterv3.Cluster_CommonLbConfig{HealthyPanicThreshold: panicT},
		TypedExtensionProtocolOptions: map[string]*anypb.Any{httpProtocolOptionsKey: mustAny(t, opts)},
	}
	if f.cluster != nil {
		f.cluster(c)
	}
	return c
}

func fallbackRoute(t *testing.T, rp *routev3.RetryPolicy) *routev3.Route {
	return &routev3.Route{
		Name: fbCluster,
		Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"},
			Headers: []*routev3.HeaderMatcher{{Name: "x-modelgate-model", HeaderMatchSpecifier: &routev3.HeaderMatcher_StringMatch{
				StringMatch: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: fbModel}}}}}},
		Action: &routev3.Route_Route{Route: &routev3.RouteAction{
			ClusterSpecifier:     &routev3.RouteAction_Cluster{Cluster: fbCluster},
			HostRewriteSpecifier: &routev3.RouteAction_AutoHostRewrite{AutoHostRewrite: wrapperspb.Bool(true)},
			Timeout:              durationpb.New(0),
			RetryPolicy:          rp,
		}},
	}
}

// upstreamStub records the upstream ext_proc streams, one per attempt.
type upstreamStub struct {
	mu      sync.Mutex
	streams [][]*extprocv3.ProcessingRequest
	ends    []error
	reply   func(n int, req *extprocv3.ProcessingRequest) *extprocv3.ProcessingResponse
}

func (u *upstreamStub) serve(s extprocv3.ExternalProcessor_ProcessServer, first *extprocv3.ProcessingRequest) error {
	u.mu.Lock()
	i := len(u.streams)
	u.streams = append(u.streams, nil)
	u.mu.Unlock()
	n := int(first.GetAttributes()[attributesKey].GetFields()["upstream.request_attempt_count"].GetNumberValue())
	req := first
	for {
		u.mu.Lock()
		u.streams[i] = append(u.streams[i], req)
		u.mu.Unlock()
		var resp *extprocv3.ProcessingResponse
		if u.reply != nil {
			resp = u.reply(n, req)
		}
		if resp == nil {
			resp = upstreamDefault(req)
		}
		if err := s.Send(resp); err != nil {
			return nil
		}
		var err error
		if req, err = s.Recv(); err != nil {
			u.mu.Lock()
			u.ends = append(u.ends, err)
			u.mu.Unlock()
			return nil
		}
	}
}

// waitEnds returns the ends of the upstream streams once n of them have
// ended, or what there is after 10 s: Envoy closes an attempt's stream
// as it moves on, which may come after the response reached the client.
func (u *upstreamStub) waitEnds(n int) []error {
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		u.mu.Lock()
		ends := append([]error(nil), u.ends...)
		u.mu.Unlock()
		if len(ends) >= n || time.Now().After(deadline) {
			return ends
		}
	}
}

func (u *upstreamStub) all() [][]*extprocv3.ProcessingRequest {
	u.mu.Lock()
	defer u.mu.Unlock()
	out := make([][]*extprocv3.ProcessingRequest, len(u.streams))
	for i, s := range u.streams {
		out[i] = append([]*extprocv3.ProcessingRequest(nil), s...)
	}
	return out
}

// upstreamDefault continues everything, and names the deployment on the
// response as the contract says.
func upstreamDefault(req *extprocv3.ProcessingRequest) *extprocv3.ProcessingResponse {
	if req.GetResponseHeaders() != nil {
		return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseHeaders{ResponseHeaders: &extprocv3.HeadersResponse{
			Response: &extprocv3.CommonResponse{HeaderMutation: &extprocv3.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{
				setHeader("x-modelgate-deployment", "seen")}}}}}}
	}
	return defaultReply(req)
}

// dualProc serves the router-level filter's streams with a stubProc and
// the upstream filter's (their first message carries attributes) with an
// upstreamStub, on one gRPC server as in the contract.
type dualProc struct {
	extprocv3.UnimplementedExternalProcessorServer
	router *stubProc
	up     *upstreamStub
}

type replayStream struct {
	extprocv3.ExternalProcessor_ProcessServer
	first *extprocv3.ProcessingRequest
}

func (r *replayStream) Recv() (*extprocv3.ProcessingRequest, error) {
	if f := r.first; f != nil {
		r.first = nil
		return f, nil
	}
	return r.ExternalProcessor_ProcessServer.Recv()
}

func (d *dualProc) Process(s extprocv3.ExternalProcessor_ProcessServer) error {
	first, err := s.Recv()
	if err != nil {
		return nil
	}
	if first.GetAttributes() != nil {
		return d.up.serve(s, first)
	}
	return d.router.Process(&replayStream{s, first})
}

// routeToModel is the router-level reply that selects the fallback route.
func routeToModel(req *extprocv3.ProcessingRequest) *extprocv3.ProcessingResponse {
	if req.GetRequestHeaders() != nil {
		return headersReply(&extprocv3.CommonResponse{ClearRouteCache: true, HeaderMutation: &extprocv3.HeaderMutation{
			SetHeaders: []*corev3.HeaderValueOption{setHeader("x-modelgate-model", fbModel)}}})
	}
	return nil
}

type fbEnv struct {
	*env
	router *stubProc
	up     *upstreamStub
	ups    []*upstreamRecorder
}

// closedAddr is an address nothing listens on.
func closedAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

func startFallback(t *testing.T, f fallback, opts ...Option) *fbEnv {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rp := f.router
	if rp == nil {
		rp = routeToModel
	}
	d := &dualProc{router: &stubProc{reply: rp}, up: &upstreamStub{reply: f.upstream}}
	gs := grpc.NewServer()
	extprocv3.RegisterExternalProcessorServer(gs, d)
	go gs.Serve(l)
	t.Cleanup(gs.Stop)
	fe := &fbEnv{router: d.router, up: d.up}
	var addrs []string
	for _, dep := range f.deployments {
		fe.ups = append(fe.ups, dep.up)
		if dep.up == nil {
			addrs = append(addrs, dep.addr)
			continue
		}
		srv := httptest.NewServer(dep.up)
		t.Cleanup(srv.Close)
		addrs = append(addrs, srv.Listener.Addr().String())
	}
	b := fallbackBootstrap(t, f, l.Addr().String(), addrs)
	e := &env{logs: make(chan Entry, 100)}
	proxy, err := New(b, append([]Option{WithAccessLog(func(en Entry) { e.logs <- en })}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(proxy)
	t.Cleanup(func() { srv.Close(); proxy.Close() })
	e.url, e.proxy = srv.URL, proxy
	fe.env = e
	return fe
}

func fallbackBootstrap(t *testing.T, f fallback, extProcAddr string, addrs []string) *bootstrapv3.Bootstrap {
	rpol := f.retry
	if rpol == nil {
		rpol = contractRetry(t)
	}
	b := testBootstrap(t, extProcAddr, closedAddr(t), setup{hcm: func(h *hcmv3.HttpConnectionManager) {
		vh := h.GetRouteConfig().GetVirtualHosts()[0]
		vh.Routes = append([]*routev3.Route{fallbackRoute(t, rpol)}, vh.Routes...)
	}})
	b.StaticResources.Clusters = append(b.StaticResources.Clusters, fallbackCluster(t, f, addrs))
	return b
}

// fallbackError is New's error for the topology, with nothing listening.
func fallbackError(t *testing.T, f fallback) error {
	var addrs []string
	for range f.deployments {
		addrs = append(addrs, closedAddr(t))
	}
	p, err := New(fallbackBootstrap(t, f, closedAddr(t), addrs))
	if err == nil {
		p.Close()
	}
	return err
}

// answering answers every request with code (and headers).
func answering(code int, kv ...string) *upstreamRecorder {
	return &upstreamRecorder{handler: func(w http.ResponseWriter, r *http.Request) {
		for i := 0; i+1 < len(kv); i += 2 {
			w.Header().Set(kv[i], kv[i+1])
		}
		w.WriteHeader(code)
		w.Write([]byte(http.StatusText(code)))
	}}
}

// fakeClock is a Clock tests move by hand; back-off waits move it too and
// return at once, and are recorded.
type fakeClock struct {
	mu    sync.Mutex
	now   time.Time
	waits []time.Duration
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.waits = append(c.waits, d)
	c.now = c.now.Add(d)
	ch := make(chan time.Time, 1)
	ch <- c.now
	return ch
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func (c *fakeClock) recorded() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.waits...)
}

// zeroRandom makes back-offs 0 (exponential) or exactly the interval
// (rate-limited), enforcing percentages certain, and picks deterministic.
func zeroRandom() uint64 { return 0 }

// post sends a chat request through the fallback route.
func (e *fbEnv) post(t *testing.T) response {
	t.Helper()
	return e.do(t, "POST", "/v1/chat/completions", `{"model":"m"}`, map[string]string{"Content-Type": "application/json"})
}
