package envoy

import (
	"fmt"
	"net"
	"net/url"
	"regexp"
	"strconv"
	"time"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	upstreamsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// ExtProcCluster is the name of the cluster of the ext_proc server.
const ExtProcCluster = "modelgate_extproc"

// Config is what the bootstrap is generated from.
type Config struct {
	// Listen is the client-facing address; zero means 0.0.0.0:8080.
	Listen string
	// ExtProcAddress is host:port of `modelgate serve`; a hostname is
	// resolved by DNS. Required.
	ExtProcAddress string
	// MessageTimeout is the ext_proc per-message timeout; zero means 10s.
	MessageTimeout time.Duration
	// BufferLimitBytes is the per-connection buffer limit of the listener
	// and clusters (Envoy's default of 1 MiB would cut request bodies);
	// zero means 32 MiB.
	BufferLimitBytes uint32
	// StreamIdleTimeout ends streams idle this long; zero means 300s.
	StreamIdleTimeout time.Duration
	// RoutingHeader carries the backend name; zero means
	// x-modelgate-backend.
	RoutingHeader string
	// MetadataNamespace receives the ext_proc server's dynamic metadata;
	// zero means io.modelgate.
	MetadataNamespace string
	// CAFile verifies https backends; zero means
	// /etc/ssl/certs/ca-certificates.crt.
	CAFile string
	// Backends become one cluster and one route each.
	Backends []Backend
}

// Backend is an upstream the gateway routes to.
type Backend struct {
	Name    string
	BaseURL string
}

func (c *Config) defaults() {
	def := func(s *string, v string) {
		if *s == "" {
			*s = v
		}
	}
	def(&c.Listen, "0.0.0.0:8080")
	def(&c.RoutingHeader, "x-modelgate-backend")
	def(&c.MetadataNamespace, "io.modelgate")
	def(&c.CAFile, "/etc/ssl/certs/ca-certificates.crt")
	if c.MessageTimeout == 0 {
		c.MessageTimeout = 10 * time.Second
	}
	if c.BufferLimitBytes == 0 {
		c.BufferLimitBytes = 32 << 20
	}
	if c.StreamIdleTimeout == 0 {
		c.StreamIdleTimeout = 300 * time.Second
	}
}

var clusterName = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,62}$`)

// upstream is a parsed backend.
type upstream struct {
	name, host string
	port       uint32
	tls        bool
}

func parseBackend(b Backend) (upstream, error) {
	if !clusterName.MatchString(b.Name) || b.Name == ExtProcCluster {
		return upstream{}, fmt.Errorf("backend %q: not a usable cluster name", b.Name)
	}
	u, err := url.Parse(b.BaseURL)
	if err != nil {
		return upstream{}, fmt.Errorf("backend %q: %w", b.Name, err)
	}
	up := upstream{name: b.Name, host: u.Hostname(), tls: u.Scheme == "https", port: 80}
	if up.tls {
		up.port = 443
	}
	if u.Scheme != "http" && u.Scheme != "https" || up.host == "" {
		return upstream{}, fmt.Errorf("backend %q: base URL %q must be http:// or https:// with a host", b.Name, b.BaseURL)
	}
	if p := u.Port(); p != "" {
		n, err := strconv.ParseUint(p, 10, 16)
		if err != nil || n == 0 {
			return upstream{}, fmt.Errorf("backend %q: bad port %q", b.Name, p)
		}
		up.port = uint32(n)
	}
	return up, nil
}

// Bootstrap generates the Envoy bootstrap.
func Bootstrap(cfg Config) (*bootstrapv3.Bootstrap, error) {
	cfg.defaults()
	var ups []upstream
	seen := map[string]bool{}
	for _, b := range cfg.Backends {
		up, err := parseBackend(b)
		if err != nil {
			return nil, err
		}
		if seen[up.name] {
			return nil, fmt.Errorf("backend %q defined twice", up.name)
		}
		seen[up.name] = true
		ups = append(ups, up)
	}
	listener, err := buildListener(cfg, ups)
	if err != nil {
		return nil, err
	}
	clusters, err := buildClusters(cfg, ups)
	if err != nil {
		return nil, err
	}
	return &bootstrapv3.Bootstrap{StaticResources: &bootstrapv3.Bootstrap_StaticResources{
		Listeners: []*listenerv3.Listener{listener},
		Clusters:  clusters,
	}}, nil
}

func hostPort(addr string) (*corev3.Address, bool, error) {
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, false, err
	}
	port, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil {
		return nil, false, fmt.Errorf("bad port in %q", addr)
	}
	return socketAddress(host, uint32(port)), net.ParseIP(host) != nil, nil
}

func socketAddress(host string, port uint32) *corev3.Address {
	return &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
		Address: host, PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: port},
	}}}
}

func mustAny(m proto.Message) *anypb.Any {
	a, err := anypb.New(m)
	if err != nil { // cannot happen for generated messages
		panic(err)
	}
	return a
}

func buildListener(cfg Config, ups []upstream) (*listenerv3.Listener, error) {
	addr, _, err := hostPort(cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("listen address: %w", err)
	}
	hcm := &hcmv3.HttpConnectionManager{
		StatPrefix:        "modelgate",
		CodecType:         hcmv3.HttpConnectionManager_AUTO,
		StreamIdleTimeout: durationpb.New(cfg.StreamIdleTimeout),
		RequestTimeout:    durationpb.New(0), // LLM streams run long
		RouteSpecifier:    &hcmv3.HttpConnectionManager_RouteConfig{RouteConfig: routes(cfg, ups)},
		HttpFilters: []*hcmv3.HttpFilter{
			{Name: "envoy.filters.http.ext_proc", ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAny(extProcFilter(cfg))}},
			{Name: "envoy.filters.http.router", ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAny(&routerv3.Router{
				SuppressEnvoyHeaders: true,
			})}},
		},
	}
	return &listenerv3.Listener{
		Name:                          "modelgate",
		Address:                       addr,
		PerConnectionBufferLimitBytes: wrapperspb.UInt32(cfg.BufferLimitBytes),
		FilterChains: []*listenerv3.FilterChain{{Filters: []*listenerv3.Filter{{
			Name:       "envoy.filters.network.http_connection_manager",
			ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: mustAny(hcm)},
		}}}},
	}, nil
}

// extProcFilter follows ARCHITECTURE.md: buffered request, buffered
// response switched to STREAMED per request with mode_override, trailers
// skipped, fail closed (the routing header must never be the client's).
func extProcFilter(cfg Config) *extprocv3.ExternalProcessor {
	return &extprocv3.ExternalProcessor{
		GrpcService: &corev3.GrpcService{TargetSpecifier: &corev3.GrpcService_EnvoyGrpc_{
			EnvoyGrpc: &corev3.GrpcService_EnvoyGrpc{ClusterName: ExtProcCluster},
		}},
		FailureModeAllow: false,
		ProcessingMode: &extprocv3.ProcessingMode{
			RequestHeaderMode:   extprocv3.ProcessingMode_SEND,
			RequestBodyMode:     extprocv3.ProcessingMode_BUFFERED,
			RequestTrailerMode:  extprocv3.ProcessingMode_SKIP,
			ResponseHeaderMode:  extprocv3.ProcessingMode_SEND,
			ResponseBodyMode:    extprocv3.ProcessingMode_BUFFERED,
			ResponseTrailerMode: extprocv3.ProcessingMode_SKIP,
		},
		AllowModeOverride: true,
		MessageTimeout:    durationpb.New(cfg.MessageTimeout),
		MetadataOptions: &extprocv3.MetadataOptions{ReceivingNamespaces: &extprocv3.MetadataOptions_MetadataNamespaces{
			Untyped: []string{cfg.MetadataNamespace},
		}},
	}
}

// notFoundBody is the catch-all's OpenAI-shaped error.
const notFoundBody = `{"error":{"message":"Unknown request URL. modelgate serves the OpenAI API under /v1.","type":"invalid_request_error","param":null,"code":"unknown_url"}}`

func routes(cfg Config, ups []upstream) *routev3.RouteConfiguration {
	var rs []*routev3.Route
	for _, up := range ups {
		host := up.host
		if up.port != 80 && up.port != 443 {
			host = net.JoinHostPort(up.host, strconv.Itoa(int(up.port)))
		}
		rs = append(rs, &routev3.Route{
			Name: up.name,
			Match: &routev3.RouteMatch{
				PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"},
				Headers: []*routev3.HeaderMatcher{{Name: cfg.RoutingHeader, HeaderMatchSpecifier: &routev3.HeaderMatcher_StringMatch{
					StringMatch: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: up.name}},
				}}},
			},
			Action: &routev3.Route_Route{Route: &routev3.RouteAction{
				ClusterSpecifier:     &routev3.RouteAction_Cluster{Cluster: up.name},
				Timeout:              durationpb.New(0),
				HostRewriteSpecifier: &routev3.RouteAction_HostRewriteLiteral{HostRewriteLiteral: host},
			}},
		})
	}
	rs = append(rs, &routev3.Route{
		Name:  "not_found",
		Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}},
		Action: &routev3.Route_DirectResponse{DirectResponse: &routev3.DirectResponseAction{
			Status: 404,
			Body:   &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: notFoundBody}},
		}},
		ResponseHeadersToAdd: []*corev3.HeaderValueOption{{
			Header:       &corev3.HeaderValue{Key: "content-type", Value: "application/json"},
			AppendAction: corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD,
		}},
	})
	return &routev3.RouteConfiguration{Name: "modelgate", VirtualHosts: []*routev3.VirtualHost{{
		Name: "modelgate", Domains: []string{"*"}, Routes: rs,
	}}}
}

func buildClusters(cfg Config, ups []upstream) ([]*clusterv3.Cluster, error) {
	ext, err := extProcCluster(cfg)
	if err != nil {
		return nil, err
	}
	out := []*clusterv3.Cluster{ext}
	for _, up := range ups {
		c := &clusterv3.Cluster{
			Name:                          up.name,
			ConnectTimeout:                durationpb.New(5 * time.Second),
			ClusterDiscoveryType:          discovery(net.ParseIP(up.host) != nil, clusterv3.Cluster_LOGICAL_DNS),
			DnsLookupFamily:               clusterv3.Cluster_V4_PREFERRED,
			PerConnectionBufferLimitBytes: wrapperspb.UInt32(cfg.BufferLimitBytes),
			LoadAssignment:                loadAssignment(up.name, socketAddress(up.host, up.port)),
		}
		if up.tls {
			c.TransportSocket = tlsSocket(up.host, cfg.CAFile)
		}
		out = append(out, c)
	}
	return out, nil
}

func discovery(ip bool, dns clusterv3.Cluster_DiscoveryType) *clusterv3.Cluster_Type {
	if ip {
		return &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC}
	}
	return &clusterv3.Cluster_Type{Type: dns}
}

func loadAssignment(name string, addr *corev3.Address) *endpointv3.ClusterLoadAssignment {
	return &endpointv3.ClusterLoadAssignment{ClusterName: name, Endpoints: []*endpointv3.LocalityLbEndpoints{{
		LbEndpoints: []*endpointv3.LbEndpoint{{HostIdentifier: &endpointv3.LbEndpoint_Endpoint{
			Endpoint: &endpointv3.Endpoint{Address: addr},
		}}},
	}}}
}

// extProcCluster speaks HTTP/2, as gRPC requires.
func extProcCluster(cfg Config) (*clusterv3.Cluster, error) {
	addr, ip, err := hostPort(cfg.ExtProcAddress)
	if err != nil {
		return nil, fmt.Errorf("ext_proc address: %w", err)
	}
	return &clusterv3.Cluster{
		Name:                          ExtProcCluster,
		ConnectTimeout:                durationpb.New(time.Second),
		ClusterDiscoveryType:          discovery(ip, clusterv3.Cluster_STRICT_DNS),
		PerConnectionBufferLimitBytes: wrapperspb.UInt32(cfg.BufferLimitBytes),
		LoadAssignment:                loadAssignment(ExtProcCluster, addr),
		TypedExtensionProtocolOptions: map[string]*anypb.Any{
			"envoy.extensions.upstreams.http.v3.HttpProtocolOptions": mustAny(&upstreamsv3.HttpProtocolOptions{
				UpstreamProtocolOptions: &upstreamsv3.HttpProtocolOptions_ExplicitHttpConfig_{
					ExplicitHttpConfig: &upstreamsv3.HttpProtocolOptions_ExplicitHttpConfig{
						ProtocolConfig: &upstreamsv3.HttpProtocolOptions_ExplicitHttpConfig_Http2ProtocolOptions{
							Http2ProtocolOptions: &corev3.Http2ProtocolOptions{},
						},
					},
				},
			}),
		},
	}, nil
}

// tlsSocket verifies the provider's certificate: without a
// validation_context Envoy would not.
func tlsSocket(host, caFile string) *corev3.TransportSocket {
	return &corev3.TransportSocket{Name: "envoy.transport_sockets.tls", ConfigType: &corev3.TransportSocket_TypedConfig{
		TypedConfig: mustAny(&tlsv3.UpstreamTlsContext{
			Sni: host,
			CommonTlsContext: &tlsv3.CommonTlsContext{ValidationContextType: &tlsv3.CommonTlsContext_ValidationContext{
				ValidationContext: &tlsv3.CertificateValidationContext{
					TrustedCa: &corev3.DataSource{Specifier: &corev3.DataSource_Filename{Filename: caFile}},
					MatchTypedSubjectAltNames: []*tlsv3.SubjectAltNameMatcher{{
						SanType: tlsv3.SubjectAltNameMatcher_DNS,
						Matcher: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: host}},
					}},
				},
			}},
		}),
	}}
}
