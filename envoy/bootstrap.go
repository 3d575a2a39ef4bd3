package envoy

import (
	"errors"
	"fmt"
	"net"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// Names of the extensions in the generated bootstrap.
const (
	hcmFilterName     = "envoy.filters.network.http_connection_manager"
	extProcFilterName = "envoy.filters.http.ext_proc"
	routerFilterName  = "envoy.filters.http.router"
)

// statPrefix names the listener, route configuration and HCM stats.
const statPrefix = "modelgate"

// notFoundBody is the catch-all's OpenAI-shaped error. Clients only reach
// it when the ext_proc server did not pick a backend, which it does for
// every request it lets through.
const notFoundBody = `{"error":{"message":"Unknown request URL. modelgate serves the OpenAI API under /v1.","type":"invalid_request_error","param":null,"code":"unknown_url"}}`

// Bootstrap generates the Envoy bootstrap for cfg: one listener running
// ext_proc then the router, one route and one cluster per backend, a 404
// catch-all route, and the ext_proc server's HTTP/2 cluster. It reports
// every problem with cfg at once.
func Bootstrap(cfg Config) (*bootstrapv3.Bootstrap, error) {
	cfg = cfg.withDefaults()
	errs := cfg.checkSettings()
	ups, backendErrs := parseBackends(cfg.Backends)
	errs = append(errs, backendErrs...)
	listener, err := buildListener(cfg, ups)
	if err != nil {
		errs = append(errs, err)
	}
	extProc, err := extProcCluster(cfg)
	if err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return &bootstrapv3.Bootstrap{StaticResources: &bootstrapv3.Bootstrap_StaticResources{
		Listeners: []*listenerv3.Listener{listener},
		Clusters:  append([]*clusterv3.Cluster{extProc}, backendClusters(cfg, ups)...),
	}}, nil
}

// mustAny packs a generated message, which cannot fail.
func mustAny(m proto.Message) *anypb.Any {
	a, err := anypb.New(m)
	if err != nil {
		panic(fmt.Sprintf("packing %T: %v", m, err))
	}
	return a
}

func socketAddress(host string, port uint32) *corev3.Address {
	return &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
		Address: host, PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: port},
	}}}
}

func buildListener(cfg Config, ups []upstream) (*listenerv3.Listener, error) {
	host, port, err := splitAddress(cfg.Listen, true)
	if err != nil {
		return nil, fmt.Errorf("listen address: %w", err)
	}
	if net.ParseIP(host) == nil {
		return nil, fmt.Errorf("listen address %q: Envoy listeners need an IP address, not a hostname", cfg.Listen)
	}
	return &listenerv3.Listener{
		Name:                          statPrefix,
		Address:                       socketAddress(host, port),
		PerConnectionBufferLimitBytes: wrapperspb.UInt32(cfg.BufferLimitBytes),
		FilterChains: []*listenerv3.FilterChain{{Filters: []*listenerv3.Filter{{
			Name:       hcmFilterName,
			ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: mustAny(connectionManager(cfg, ups))},
		}}}},
	}, nil
}

// connectionManager leaves generate_request_id at its default (on) and
// sets no request_timeout, so only the idle timeout ends long streams.
func connectionManager(cfg Config, ups []upstream) *hcmv3.HttpConnectionManager {
	return &hcmv3.HttpConnectionManager{
		StatPrefix:        statPrefix,
		CodecType:         hcmv3.HttpConnectionManager_AUTO,
		StreamIdleTimeout: durationpb.New(cfg.StreamIdleTimeout),
		RequestTimeout:    durationpb.New(0),
		RouteSpecifier:    &hcmv3.HttpConnectionManager_RouteConfig{RouteConfig: routes(cfg, ups)},
		HttpFilters: []*hcmv3.HttpFilter{
			{Name: extProcFilterName, ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAny(extProcFilter(cfg))}},
			{Name: routerFilterName, ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAny(&routerv3.Router{
				SuppressEnvoyHeaders: true,
			})}},
		},
	}
}

// extProcFilter buffers both bodies; the ext_proc server switches
// successful streams to STREAMED with mode_override. It fails closed: the
// routing header must only ever come from the ext_proc server.
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

// routes matches the routing header. The route cached before ext_proc
// runs is normally the catch-all; the ext_proc server's clear_route_cache
// makes the router match again on the header it set.
func routes(cfg Config, ups []upstream) *routev3.RouteConfiguration {
	var rs []*routev3.Route
	for _, up := range ups {
		rs = append(rs, backendRoute(cfg.RoutingHeader, up))
	}
	rs = append(rs, notFoundRoute())
	return &routev3.RouteConfiguration{Name: statPrefix, VirtualHosts: []*routev3.VirtualHost{{
		Name: statPrefix, Domains: []string{"*"}, Routes: rs,
	}}}
}

// backendRoute has no timeout, as the default 15s would cut generations.
func backendRoute(header string, up upstream) *routev3.Route {
	return &routev3.Route{
		Name: up.name,
		Match: &routev3.RouteMatch{
			PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"},
			Headers: []*routev3.HeaderMatcher{{Name: header, HeaderMatchSpecifier: &routev3.HeaderMatcher_StringMatch{
				StringMatch: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: up.name}},
			}}},
		},
		Action: &routev3.Route_Route{Route: &routev3.RouteAction{
			ClusterSpecifier:     &routev3.RouteAction_Cluster{Cluster: up.name},
			Timeout:              durationpb.New(0),
			HostRewriteSpecifier: &routev3.RouteAction_HostRewriteLiteral{HostRewriteLiteral: up.authority()},
		}},
	}
}

func notFoundRoute() *routev3.Route {
	return &routev3.Route{
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
	}
}
