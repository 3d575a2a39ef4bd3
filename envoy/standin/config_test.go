package standin

import (
	"strings"
	"testing"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	mutationrulesv3 "github.com/envoyproxy/go-control-plane/envoy/config/common/mutation_rules/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// Whatever the stand-in does not implement, it refuses at construction.
func TestUnsupportedConfigIsRefused(t *testing.T) {
	tests := []struct {
		name string
		edit func(b *bootstrapv3.Bootstrap)
		want string
	}{
		{"two listeners", func(b *bootstrapv3.Bootstrap) {
			b.StaticResources.Listeners = append(b.StaticResources.Listeners, b.StaticResources.Listeners[0])
		}, "one static listener"},
		{"EDS cluster", func(b *bootstrapv3.Bootstrap) {
			b.StaticResources.Clusters[1].ClusterDiscoveryType = &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS}
		}, "type EDS"},
		{"observability mode", func(b *bootstrapv3.Bootstrap) {
			editExtProc(t, b, func(ep *filterv3.ExternalProcessor) { ep.ObservabilityMode = true })
		}, "observability"},
		{"mutation rules", func(b *bootstrapv3.Bootstrap) {
			editExtProc(t, b, func(ep *filterv3.ExternalProcessor) {
				ep.MutationRules = &mutationrulesv3.HeaderMutationRules{AllowAllRouting: wrapperspb.Bool(true)}
			})
		}, "mutation_rules"},
		{"FULL_DUPLEX_STREAMED", func(b *bootstrapv3.Bootstrap) {
			editExtProc(t, b, func(ep *filterv3.ExternalProcessor) {
				ep.ProcessingMode.ResponseBodyMode = filterv3.ProcessingMode_FULL_DUPLEX_STREAMED
			})
		}, "response body mode"},
		{"ext_proc cluster without HTTP/2", func(b *bootstrapv3.Bootstrap) {
			b.StaticResources.Clusters[0].TypedExtensionProtocolOptions = nil
		}, "HTTP/2"},
	}
	for name, edit := range map[string]func(*hcmv3.HttpConnectionManager){
		"virtual host retry_policy": func(h *hcmv3.HttpConnectionManager) {
			h.GetRouteConfig().GetVirtualHosts()[0].RetryPolicy = &routev3.RetryPolicy{NumRetries: wrapperspb.UInt32(0)}
		},
		"route idle_timeout": editRoute("up", func(r *routev3.Route) { r.GetRoute().IdleTimeout = ms(100) }),
		"route request_headers_to_add": editRoute("up", func(r *routev3.Route) {
			r.RequestHeadersToAdd = []*corev3.HeaderValueOption{setHeader("x", "y")}
		}),
		"response_headers_to_add on a routed route": editRoute("up", func(r *routev3.Route) {
			r.ResponseHeadersToAdd = []*corev3.HeaderValueOption{setHeader("x", "y")}
		}),
	} {
		tests = append(tests, struct {
			name string
			edit func(b *bootstrapv3.Bootstrap)
			want string
		}{name, func(b *bootstrapv3.Bootstrap) { *b = *offlineBootstrap(t, setup{hcm: edit}) }, "unsupported configuration"})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := offlineBootstrap(t, setup{})
			tt.edit(b)
			if _, err := New(b); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("New error = %v, want one mentioning %q", err, tt.want)
			}
		})
	}
}
