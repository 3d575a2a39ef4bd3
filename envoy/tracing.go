package envoy

import (
	"fmt"
	"net"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tracev3 "github.com/envoyproxy/go-control-plane/envoy/config/trace/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// TracingCluster is the cluster of the OpenTelemetry collector Envoy sends
// its spans to, when Config.TracingCollector is set.
const TracingCluster = "opentelemetry_collector"

// tracerName is Envoy's OpenTelemetry tracer extension.
const tracerName = "envoy.tracers.opentelemetry"

// tracingExportTimeout bounds each export of spans to the collector.
const tracingExportTimeout = 250 * time.Millisecond

// Tracing is what Config.TracingCollector turns on: Envoy's own
// OpenTelemetry spans of every request, exported over OTLP/gRPC. Envoy
// then sends its trace context on the ext_proc stream, so the ext_proc
// server's spans are children of Envoy's.
type Tracing struct {
	// Collector is host:port of an OTLP/gRPC collector (plaintext
	// HTTP/2). Empty: Envoy does not trace.
	Collector string
	// ServiceName names Envoy's spans' service. Zero means
	// modelgate-envoy.
	ServiceName string
}

// connectionTracing is the connection manager's tracing, nil when off.
func connectionTracing(cfg Config) *hcmv3.HttpConnectionManager_Tracing {
	if cfg.Tracing.Collector == "" {
		return nil
	}
	return &hcmv3.HttpConnectionManager_Tracing{
		Provider: &tracev3.Tracing_Http{
			Name: tracerName,
			ConfigType: &tracev3.Tracing_Http_TypedConfig{TypedConfig: mustAny(&tracev3.OpenTelemetryConfig{
				GrpcService: &corev3.GrpcService{
					TargetSpecifier: &corev3.GrpcService_EnvoyGrpc_{EnvoyGrpc: &corev3.GrpcService_EnvoyGrpc{ClusterName: TracingCluster}},
					Timeout:         durationpb.New(tracingExportTimeout),
				},
				ServiceName: cfg.Tracing.ServiceName,
			})},
		},
	}
}

// tracingCluster is the collector's HTTP/2 cluster, nil when off.
func tracingCluster(cfg Config) (*clusterv3.Cluster, error) {
	if cfg.Tracing.Collector == "" {
		return nil, nil
	}
	host, port, err := splitAddress(cfg.Tracing.Collector, false)
	if err != nil {
		return nil, fmt.Errorf("tracing collector: %w", err)
	}
	c := &clusterv3.Cluster{
		Name:                          TracingCluster,
		ConnectTimeout:                durationpb.New(extProcConnectTimeout),
		LoadAssignment:                loadAssignment(TracingCluster, host, port),
		TypedExtensionProtocolOptions: http2Only(),
		PerConnectionBufferLimitBytes: wrapperspb.UInt32(1 << 20),
	}
	setDiscovery(c, net.ParseIP(host) != nil, clusterv3.Cluster_STRICT_DNS)
	return c, nil
}
