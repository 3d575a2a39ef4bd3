package envoy

import (
	"fmt"
	"net"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	tracev3 "github.com/envoyproxy/go-control-plane/envoy/config/trace/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	upstreamsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
)

// crossCheck does the checks Envoy makes when it loads a bootstrap that
// PGV cannot: names that must refer to something, and rules that span
// fields. It covers static resources only.
func crossCheck(b *bootstrapv3.Bootstrap) []*Problem {
	sr := b.GetStaticResources()
	clusters := map[string]*clusterv3.Cluster{}
	var ps []*Problem
	for i, c := range sr.GetClusters() {
		at := fmt.Sprintf("static_resources.clusters[%d]", i)
		if clusters[c.GetName()] != nil {
			ps = append(ps, &Problem{Path: at + ".name", Message: fmt.Sprintf("duplicate cluster name %q", c.GetName())})
		}
		clusters[c.GetName()] = c
		ps = append(ps, checkEndpoints(at, c)...)
		for j, hc := range c.GetHealthChecks() {
			if hc.GetGrpcHealthCheck() != nil && !speaksHTTP2(c) {
				ps = append(ps, &Problem{Path: fmt.Sprintf("%s.health_checks[%d].grpc_health_check", at, j),
					Message: fmt.Sprintf("gRPC health checks need cluster %q to speak HTTP/2", c.GetName())})
			}
		}
	}
	for i, l := range sr.GetListeners() {
		at := fmt.Sprintf("static_resources.listeners[%d]", i)
		if host := l.GetAddress().GetSocketAddress().GetAddress(); host != "" && net.ParseIP(host) == nil {
			ps = append(ps, &Problem{Path: at + ".address.socket_address.address",
				Message: fmt.Sprintf("a listener needs an IP address, not %q", host)})
		}
		ps = append(ps, checkFilterChains(at, l.GetFilterChains(), clusters)...)
	}
	return append(ps, checkAdmin(b)...)
}

// checkAdmin: the admin interface binds an IP address, and not a port a
// listener binds too.
func checkAdmin(b *bootstrapv3.Bootstrap) []*Problem {
	sa := b.GetAdmin().GetAddress().GetSocketAddress()
	if sa == nil {
		return nil
	}
	const at = "admin.address.socket_address"
	if net.ParseIP(sa.GetAddress()) == nil {
		return []*Problem{{Path: at + ".address", Message: fmt.Sprintf("the admin interface needs an IP address, not %q", sa.GetAddress())}}
	}
	for i, l := range b.GetStaticResources().GetListeners() {
		la := l.GetAddress().GetSocketAddress()
		if la != nil && sa.GetPortValue() != 0 && la.GetPortValue() == sa.GetPortValue() && overlap(sa.GetAddress(), la.GetAddress()) {
			return []*Problem{{Path: at + ".port_value", Message: fmt.Sprintf("port %d is taken by static_resources.listeners[%d]", sa.GetPortValue(), i)}}
		}
	}
	return nil
}

// checkEndpoints: STATIC clusters take IP addresses only, LOGICAL_DNS
// clusters exactly one endpoint.
func checkEndpoints(at string, c *clusterv3.Cluster) []*Problem {
	var ps []*Problem
	localities := c.GetLoadAssignment().GetEndpoints()
	if c.GetType() == clusterv3.Cluster_LOGICAL_DNS && (len(localities) != 1 || len(localities[0].GetLbEndpoints()) != 1) {
		ps = append(ps, &Problem{Path: at + ".load_assignment", Message: "a LOGICAL_DNS cluster needs exactly one endpoint"})
	}
	if c.GetType() != clusterv3.Cluster_STATIC {
		return ps
	}
	for i, l := range localities {
		for j, e := range l.GetLbEndpoints() {
			host := e.GetEndpoint().GetAddress().GetSocketAddress().GetAddress()
			if host != "" && net.ParseIP(host) == nil {
				ps = append(ps, &Problem{
					Path:    fmt.Sprintf("%s.load_assignment.endpoints[%d].lb_endpoints[%d].endpoint.address.socket_address.address", at, i, j),
					Message: fmt.Sprintf("a STATIC cluster needs IP addresses, not %q (use STRICT_DNS or LOGICAL_DNS)", host),
				})
			}
		}
	}
	return ps
}

func checkFilterChains(at string, fcs []*listenerv3.FilterChain, clusters map[string]*clusterv3.Cluster) []*Problem {
	var ps []*Problem
	for i, fc := range fcs {
		for j, f := range fc.GetFilters() {
			hcm := &hcmv3.HttpConnectionManager{}
			if f.GetTypedConfig() == nil || f.GetTypedConfig().UnmarshalTo(hcm) != nil {
				continue
			}
			hat := fmt.Sprintf("%s.filter_chains[%d].filters[%d].typed_config", at, i, j)
			ps = append(ps, checkRoutes(hat+".route_config", hcm.GetRouteConfig(), clusters)...)
			ps = append(ps, checkHTTPFilters(hat, hcm.GetHttpFilters(), clusters)...)
			ps = append(ps, checkTracing(hat+".tracing.provider.typed_config", hcm.GetTracing(), clusters)...)
		}
	}
	return ps
}

// checkTracing: an OpenTelemetry tracer's gRPC collector is a cluster that
// speaks HTTP/2.
func checkTracing(at string, t *hcmv3.HttpConnectionManager_Tracing, clusters map[string]*clusterv3.Cluster) []*Problem {
	otel := &tracev3.OpenTelemetryConfig{}
	if tc := t.GetProvider().GetTypedConfig(); tc == nil || tc.UnmarshalTo(otel) != nil {
		return nil
	}
	name := otel.GetGrpcService().GetEnvoyGrpc().GetClusterName()
	if name == "" {
		return nil
	}
	switch c := clusters[name]; {
	case c == nil:
		return []*Problem{{Path: at + ".grpc_service.envoy_grpc.cluster_name", Message: fmt.Sprintf("unknown cluster %q", name)}}
	case !speaksHTTP2(c):
		return []*Problem{{Path: at + ".grpc_service.envoy_grpc.cluster_name", Message: fmt.Sprintf("cluster %q must speak HTTP/2 for gRPC", name)}}
	}
	return nil
}

func checkRoutes(at string, rc *routev3.RouteConfiguration, clusters map[string]*clusterv3.Cluster) []*Problem {
	var ps []*Problem
	unknown := func(path, name string) {
		if clusters[name] == nil {
			ps = append(ps, &Problem{Path: path, Message: fmt.Sprintf("unknown cluster %q", name)})
		}
	}
	for i, vh := range rc.GetVirtualHosts() {
		for j, r := range vh.GetRoutes() {
			rat := fmt.Sprintf("%s.virtual_hosts[%d].routes[%d].route", at, i, j)
			if name := r.GetRoute().GetCluster(); name != "" {
				unknown(rat+".cluster", name)
			}
			for k, wc := range r.GetRoute().GetWeightedClusters().GetClusters() {
				unknown(fmt.Sprintf("%s.weighted_clusters.clusters[%d].name", rat, k), wc.GetName())
			}
		}
	}
	return ps
}

// checkHTTPFilters checks each ext_proc filter and that the router, the
// only terminal filter our bootstraps use, comes last, as Envoy requires
// of a terminal filter.
func checkHTTPFilters(at string, filters []*hcmv3.HttpFilter, clusters map[string]*clusterv3.Cluster) []*Problem {
	var ps []*Problem
	for i, f := range filters {
		fat := fmt.Sprintf("%s.http_filters[%d]", at, i)
		ep := &extprocv3.ExternalProcessor{}
		if f.GetTypedConfig() != nil && f.GetTypedConfig().UnmarshalTo(ep) == nil {
			ps = append(ps, checkExtProc(fat+".typed_config", ep, clusters)...)
		}
		isRouter := f.GetTypedConfig() != nil && f.GetTypedConfig().MessageIs(&routerv3.Router{})
		last := i == len(filters)-1
		if isRouter && !last {
			ps = append(ps, &Problem{Path: fat, Message: "the router is a terminal filter and must be the last HTTP filter"})
		}
		if last && !isRouter {
			ps = append(ps, &Problem{Path: fat, Message: "the last HTTP filter must be terminal: the router"})
		}
	}
	return ps
}

func checkExtProc(at string, ep *extprocv3.ExternalProcessor, clusters map[string]*clusterv3.Cluster) []*Problem {
	var ps []*Problem
	add := func(path, msg string) { ps = append(ps, &Problem{Path: at + path, Message: msg}) }
	if (ep.GetGrpcService() == nil) == (ep.GetHttpService() == nil) {
		add("", "ext_proc needs exactly one of grpc_service and http_service")
	}
	pm := ep.GetProcessingMode()
	if pm.GetRequestBodyMode() == extprocv3.ProcessingMode_FULL_DUPLEX_STREAMED && pm.GetRequestTrailerMode() != extprocv3.ProcessingMode_SEND {
		add(".processing_mode.request_trailer_mode", "must be SEND when request_body_mode is FULL_DUPLEX_STREAMED")
	}
	if pm.GetResponseBodyMode() == extprocv3.ProcessingMode_FULL_DUPLEX_STREAMED && pm.GetResponseTrailerMode() != extprocv3.ProcessingMode_SEND {
		add(".processing_mode.response_trailer_mode", "must be SEND when response_body_mode is FULL_DUPLEX_STREAMED")
	}
	eg := ep.GetGrpcService().GetEnvoyGrpc()
	if eg == nil {
		return ps
	}
	switch c := clusters[eg.GetClusterName()]; {
	case c == nil:
		add(".grpc_service.envoy_grpc.cluster_name", fmt.Sprintf("unknown cluster %q", eg.GetClusterName()))
	case !speaksHTTP2(c):
		add(".grpc_service.envoy_grpc.cluster_name", fmt.Sprintf("cluster %q must speak HTTP/2 for gRPC: set typed_extension_protocol_options[%s] explicit_http_config.http2_protocol_options", eg.GetClusterName(), httpProtocolOptionsKey))
	}
	return ps
}

// speaksHTTP2 accepts explicit HTTP/2 options and the deprecated
// cluster-level http2_protocol_options; auto_config would need ALPN.
func speaksHTTP2(c *clusterv3.Cluster) bool {
	//lint:ignore SA1019 Envoy still honours the deprecated field, so a config using it speaks HTTP/2
	if c.GetHttp2ProtocolOptions() != nil {
		return true
	}
	a := c.GetTypedExtensionProtocolOptions()[httpProtocolOptionsKey]
	opts := &upstreamsv3.HttpProtocolOptions{}
	if a == nil || a.UnmarshalTo(opts) != nil {
		return false
	}
	return opts.GetExplicitHttpConfig().GetHttp2ProtocolOptions() != nil
}
