package envoy

import (
	"strings"
	"testing"

	tracev3 "github.com/envoyproxy/go-control-plane/envoy/config/trace/v3"
)

// With a collector, Envoy traces every request with its OpenTelemetry
// tracer to an HTTP/2 cluster of the collector; the bootstrap validates
// against go-control-plane's protos, and a tracer naming an unknown
// cluster is caught. Without one, nothing of tracing is in the bootstrap.
func TestTracing(t *testing.T) {
	if hcmOf(t, generate(t, testConfig)).GetTracing() != nil {
		t.Error("tracing without a collector")
	}
	cfg := testConfig
	cfg.Tracing = Tracing{Collector: "otel-collector:4317"}
	b := generate(t, cfg)
	if err := Validate(b); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	tr := hcmOf(t, b).GetTracing()
	otel := unpack(t, tr.GetProvider().GetTypedConfig(), &tracev3.OpenTelemetryConfig{})
	if tr.GetProvider().GetName() != "envoy.tracers.opentelemetry" || otel.GetGrpcService().GetEnvoyGrpc().GetClusterName() != TracingCluster ||
		otel.GetServiceName() != "modelgate-envoy" {
		t.Errorf("tracing = %v", tr)
	}
	c := clusterNamed(t, b, TracingCluster)
	if a := endpointOf(c); a.GetAddress() != "otel-collector" || a.GetPortValue() != 4317 || !speaksHTTP2(c) {
		t.Errorf("collector cluster = %v", c)
	}
	otel.GetGrpcService().GetEnvoyGrpc().ClusterName = "nowhere"
	hcm := hcmOf(t, b)
	hcm.Tracing.Provider.GetTypedConfig().MarshalFrom(otel)                                     //nolint:errcheck // a known message
	b.StaticResources.Listeners[0].FilterChains[0].Filters[0].GetTypedConfig().MarshalFrom(hcm) //nolint:errcheck
	if err := Validate(b); err == nil || !strings.Contains(err.Error(), `unknown cluster "nowhere"`) {
		t.Errorf("a tracer of an unknown cluster: %v", err)
	}
	cfg.Tracing.Collector = "no-port"
	if _, err := Bootstrap(cfg); err == nil || !strings.Contains(err.Error(), "tracing collector") {
		t.Errorf("a collector without a port: %v", err)
	}
}
