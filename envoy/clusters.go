package envoy

import (
	"fmt"
	"net"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	upstreamsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// httpProtocolOptionsKey is where Envoy looks for a cluster's HTTP
// protocol options in typed_extension_protocol_options.
const httpProtocolOptionsKey = "envoy.extensions.upstreams.http.v3.HttpProtocolOptions"

// tlsSocketName is the upstream TLS transport socket.
const tlsSocketName = "envoy.transport_sockets.tls"

// Connect timeouts: the ext_proc server is nearby, providers are not.
const (
	extProcConnectTimeout = time.Second
	backendConnectTimeout = 5 * time.Second
)

// The ext_proc server's health check (gRPC health service, service ""):
// a draining or unready server is out within two failed checks, a ready
// one back after one. no_traffic_interval is Envoy's interval for a
// cluster that never had traffic, 60s by default: as long as the first
// check's verdict would stand at startup.
const (
	healthInterval       = 5 * time.Second
	healthTimeout        = time.Second
	healthUnhealthyAfter = 2
	healthHealthyAfter   = 1
)

// extProcCluster speaks HTTP/2, as gRPC requires, and buffers as much as
// the listener: BUFFERED bodies travel to the server in one message.
func extProcCluster(cfg Config) (*clusterv3.Cluster, error) {
	host, port, err := splitAddress(cfg.ExtProcAddress, false)
	if err != nil {
		return nil, fmt.Errorf("ext_proc address (required): %w", err)
	}
	c := &clusterv3.Cluster{
		Name:                          ExtProcCluster,
		ConnectTimeout:                durationpb.New(extProcConnectTimeout),
		PerConnectionBufferLimitBytes: wrapperspb.UInt32(cfg.BufferLimitBytes),
		LoadAssignment:                loadAssignment(ExtProcCluster, host, port),
		CircuitBreakers:               circuitBreakers(cfg),
		HealthChecks:                  []*corev3.HealthCheck{extProcHealthCheck()},
		TypedExtensionProtocolOptions: http2Only(),
	}
	setDiscovery(c, net.ParseIP(host) != nil, clusterv3.Cluster_STRICT_DNS)
	return c, nil
}

// http2Only are the protocol options of a gRPC cluster: HTTP/2, always.
func http2Only() map[string]*anypb.Any {
	return map[string]*anypb.Any{
		httpProtocolOptionsKey: mustAny(&upstreamsv3.HttpProtocolOptions{
			UpstreamProtocolOptions: &upstreamsv3.HttpProtocolOptions_ExplicitHttpConfig_{
				ExplicitHttpConfig: &upstreamsv3.HttpProtocolOptions_ExplicitHttpConfig{
					ProtocolConfig: &upstreamsv3.HttpProtocolOptions_ExplicitHttpConfig_Http2ProtocolOptions{
						Http2ProtocolOptions: &corev3.Http2ProtocolOptions{},
					},
				},
			},
		}),
	}
}

// circuitBreakers lift Envoy's default of 1,024 requests, pending
// requests and connections per cluster to cfg.MaxRequests: every request
// in flight holds a stream to the ext_proc server, so the default would
// cap the whole gateway, and each backend too. track_remaining publishes
// the room left as stats (circuit_breakers.default.remaining_rq).
func circuitBreakers(cfg Config) *clusterv3.CircuitBreakers {
	n := wrapperspb.UInt32(cfg.MaxRequests)
	return &clusterv3.CircuitBreakers{Thresholds: []*clusterv3.CircuitBreakers_Thresholds{{
		Priority:       corev3.RoutingPriority_DEFAULT,
		MaxConnections: n, MaxPendingRequests: n, MaxRequests: n,
		TrackRemaining: true,
	}}}
}

// extProcHealthCheck asks the server's gRPC health service, which answers
// NOT_SERVING while the server is not ready or drains. Envoy then sends
// new requests to the other addresses of the ext_proc cluster; when fewer
// than half are healthy (a single address, as in compose), its panic
// threshold sends them to all, so a lone server is never shut out by its
// health check alone.
func extProcHealthCheck() *corev3.HealthCheck {
	return &corev3.HealthCheck{
		Timeout:            durationpb.New(healthTimeout),
		Interval:           durationpb.New(healthInterval),
		NoTrafficInterval:  durationpb.New(healthInterval),
		UnhealthyThreshold: wrapperspb.UInt32(healthUnhealthyAfter),
		HealthyThreshold:   wrapperspb.UInt32(healthHealthyAfter),
		HealthChecker: &corev3.HealthCheck_GrpcHealthCheck_{GrpcHealthCheck: &corev3.HealthCheck_GrpcHealthCheck{
			ServiceName: "",
		}},
	}
}

// backendClusters makes one cluster per backend, named after it.
// LOGICAL_DNS connects to the first address of each DNS answer and keeps
// connections when the answer changes, as Envoy recommends for large web
// services such as the providers' APIs.
func backendClusters(cfg Config, ups []upstream) []*clusterv3.Cluster {
	var out []*clusterv3.Cluster
	for _, up := range ups {
		c := &clusterv3.Cluster{
			Name:                          up.name,
			ConnectTimeout:                durationpb.New(backendConnectTimeout),
			PerConnectionBufferLimitBytes: wrapperspb.UInt32(cfg.BufferLimitBytes),
			LoadAssignment:                loadAssignment(up.name, up.host, up.port),
			CircuitBreakers:               circuitBreakers(cfg),
		}
		setDiscovery(c, up.isIP(), clusterv3.Cluster_LOGICAL_DNS)
		if up.tls {
			c.TransportSocket = tlsSocket(up, cfg.CAFile)
		}
		out = append(out, c)
	}
	return out
}

// setDiscovery makes c STATIC for an IP literal, otherwise dns; DNS
// clusters prefer IPv4, as container networks often lack IPv6.
func setDiscovery(c *clusterv3.Cluster, ip bool, dns clusterv3.Cluster_DiscoveryType) {
	if ip {
		c.ClusterDiscoveryType = &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC}
		return
	}
	c.ClusterDiscoveryType = &clusterv3.Cluster_Type{Type: dns}
	c.DnsLookupFamily = clusterv3.Cluster_V4_PREFERRED
}

func loadAssignment(name, host string, port uint32) *endpointv3.ClusterLoadAssignment {
	return &endpointv3.ClusterLoadAssignment{ClusterName: name, Endpoints: []*endpointv3.LocalityLbEndpoints{{
		LbEndpoints: []*endpointv3.LbEndpoint{{HostIdentifier: &endpointv3.LbEndpoint_Endpoint{
			Endpoint: &endpointv3.Endpoint{Address: socketAddress(host, port)},
		}}},
	}}}
}

// tlsSocket verifies the backend's certificate against the CA bundle and
// its host name: without a validation_context Envoy verifies nothing. An
// IP literal gets no SNI (RFC 6066 forbids it) and an IP SAN match.
func tlsSocket(up upstream, caFile string) *corev3.TransportSocket {
	san := &tlsv3.SubjectAltNameMatcher{
		SanType: tlsv3.SubjectAltNameMatcher_DNS,
		Matcher: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: up.host}},
	}
	sni := up.host
	if up.isIP() {
		san.SanType, sni = tlsv3.SubjectAltNameMatcher_IP_ADDRESS, ""
	}
	return &corev3.TransportSocket{Name: tlsSocketName, ConfigType: &corev3.TransportSocket_TypedConfig{
		TypedConfig: mustAny(&tlsv3.UpstreamTlsContext{
			Sni: sni,
			CommonTlsContext: &tlsv3.CommonTlsContext{ValidationContextType: &tlsv3.CommonTlsContext_ValidationContext{
				ValidationContext: &tlsv3.CertificateValidationContext{
					TrustedCa:                 &corev3.DataSource{Specifier: &corev3.DataSource_Filename{Filename: caFile}},
					MatchTypedSubjectAltNames: []*tlsv3.SubjectAltNameMatcher{san},
				},
			}},
		}),
	}}
}
