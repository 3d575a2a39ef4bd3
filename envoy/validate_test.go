package envoy

import (
	"testing"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	upstreamsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// editAny unpacks a into m, lets edit change m and packs it back into a.
func editAny[M proto.Message](t *testing.T, a *anypb.Any, m M, edit func(M)) {
	t.Helper()
	edit(unpack(t, a, m))
	if err := a.MarshalFrom(m); err != nil {
		t.Fatal(err)
	}
}

func editHCM(t *testing.T, b *bootstrapv3.Bootstrap, edit func(*hcmv3.HttpConnectionManager)) {
	t.Helper()
	a := b.GetStaticResources().GetListeners()[0].GetFilterChains()[0].GetFilters()[0].GetTypedConfig()
	editAny(t, a, &hcmv3.HttpConnectionManager{}, edit)
}

// Validate's checks that no text edit of the generated YAML reaches.
func TestValidateCatches(t *testing.T) {
	t.Parallel()
	const extProcAt = hcmPath + ".http_filters[0].typed_config"
	tests := []struct {
		name              string
		edit              func(*testing.T, *bootstrapv3.Bootstrap)
		wantPath, wantMsg string
	}{
		{"router not last", func(t *testing.T, b *bootstrapv3.Bootstrap) {
			editHCM(t, b, func(h *hcmv3.HttpConnectionManager) {
				h.HttpFilters[0], h.HttpFilters[1] = h.HttpFilters[1], h.HttpFilters[0]
			})
		}, hcmPath + ".http_filters[0]", "must be the last HTTP filter"},
		{"no terminal filter", func(t *testing.T, b *bootstrapv3.Bootstrap) {
			editHCM(t, b, func(h *hcmv3.HttpConnectionManager) { h.HttpFilters = h.HttpFilters[:1] })
		}, hcmPath + ".http_filters[0]", "last HTTP filter must be terminal"},
		{"ext_proc without a service", func(t *testing.T, b *bootstrapv3.Bootstrap) {
			editHCM(t, b, func(h *hcmv3.HttpConnectionManager) {
				editAny(t, h.HttpFilters[0].GetTypedConfig(), &extprocv3.ExternalProcessor{}, func(ep *extprocv3.ExternalProcessor) { ep.GrpcService = nil })
			})
		}, extProcAt, "exactly one of grpc_service and http_service"},
		{"response FULL_DUPLEX_STREAMED with trailers skipped", func(t *testing.T, b *bootstrapv3.Bootstrap) {
			editHCM(t, b, func(h *hcmv3.HttpConnectionManager) {
				editAny(t, h.HttpFilters[0].GetTypedConfig(), &extprocv3.ExternalProcessor{}, func(ep *extprocv3.ExternalProcessor) {
					ep.ProcessingMode.ResponseBodyMode = extprocv3.ProcessingMode_FULL_DUPLEX_STREAMED
				})
			})
		}, extProcAt + ".processing_mode.response_trailer_mode", "must be SEND"},
		{"weighted cluster missing", func(t *testing.T, b *bootstrapv3.Bootstrap) {
			editHCM(t, b, func(h *hcmv3.HttpConnectionManager) {
				h.GetRouteConfig().GetVirtualHosts()[0].GetRoutes()[0].GetRoute().ClusterSpecifier = &routev3.RouteAction_WeightedClusters{
					WeightedClusters: &routev3.WeightedCluster{Clusters: []*routev3.WeightedCluster_ClusterWeight{
						{Name: "local", Weight: wrapperspb.UInt32(1)}, {Name: "ghost", Weight: wrapperspb.UInt32(1)},
					}},
				}
			})
		}, hcmPath + ".route_config.virtual_hosts[0].routes[0].route.weighted_clusters.clusters[1].name", `unknown cluster "ghost"`},
		{"LOGICAL_DNS with two endpoints", func(t *testing.T, b *bootstrapv3.Bootstrap) {
			la := b.GetStaticResources().GetClusters()[1].GetLoadAssignment()
			la.Endpoints = append(la.Endpoints, &endpointv3.LocalityLbEndpoints{LbEndpoints: la.Endpoints[0].LbEndpoints})
		}, "static_resources.clusters[1].load_assignment", "exactly one endpoint"},
		{"unregistered type in an Any", func(t *testing.T, b *bootstrapv3.Bootstrap) {
			editHCM(t, b, func(h *hcmv3.HttpConnectionManager) {
				h.HttpFilters[1].ConfigType = &hcmv3.HttpFilter_TypedConfig{TypedConfig: &anypb.Any{TypeUrl: "type.googleapis.com/no.Such"}}
			})
		}, hcmPath + ".http_filters[1].typed_config", "unpacking type.googleapis.com/no.Such"},
		{"PGV in a map value", func(t *testing.T, b *bootstrapv3.Bootstrap) {
			a := b.GetStaticResources().GetClusters()[0].GetTypedExtensionProtocolOptions()[httpProtocolOptionsKey]
			editAny(t, a, &upstreamsv3.HttpProtocolOptions{}, func(o *upstreamsv3.HttpProtocolOptions) {
				o.GetExplicitHttpConfig().GetHttp2ProtocolOptions().MaxConcurrentStreams = wrapperspb.UInt32(0)
			})
		}, "static_resources.clusters[0].typed_extension_protocol_options[" + httpProtocolOptionsKey +
			"].explicit_http_config.http2_protocol_options.max_concurrent_streams", "inside range"},
		{"PGV in the TLS context", func(t *testing.T, b *bootstrapv3.Bootstrap) {
			editAny(t, b.GetStaticResources().GetClusters()[1].GetTransportSocket().GetTypedConfig(), &tlsv3.UpstreamTlsContext{},
				func(c *tlsv3.UpstreamTlsContext) {
					c.GetCommonTlsContext().GetValidationContext().GetMatchTypedSubjectAltNames()[0].SanType = tlsv3.SubjectAltNameMatcher_SAN_TYPE_UNSPECIFIED
				})
		}, "static_resources.clusters[1].transport_socket.typed_config.common_tls_context.validation_context.match_typed_subject_alt_names[0].san_type", "not be in list"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := generate(t, testConfig)
			if err := Validate(b); err != nil {
				t.Fatalf("Validate(generated) = %v", err)
			}
			tt.edit(t, b)
			if err := Validate(b); !hasProblem(err, tt.wantPath, tt.wantMsg) {
				t.Errorf("Validate = %v, want a problem at %s mentioning %q", err, tt.wantPath, tt.wantMsg)
			}
		})
	}
}
