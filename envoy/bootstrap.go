package envoy

import (
	"errors"
	"fmt"
	"net"
	"slices"

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

	"modelgate/envoy/routing"
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
	ups, backendErrs := cfg.parseBackends()
	errs = append(errs, backendErrs...)
	errs = append(errs, cfg.checkModels(ups)...)
	errs = append(errs, cfg.checkVersion()...)
	listener, err := buildListener(cfg, ups)
	if err != nil {
		errs = append(errs, err)
	}
	extProc, err := extProcCluster(cfg)
	if err != nil {
		errs = append(errs, err)
	}
	adminHost, adminPort, err := cfg.checkAdmin()
	if err != nil {
		errs = append(errs, err)
	}
	models, err := modelClusters(cfg, ups)
	if err != nil {
		errs = append(errs, err)
	}
	tracing, err := tracingCluster(cfg)
	if err != nil {
		errs = append(errs, err)
	} else if tracing != nil {
		models = append(models, tracing)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return &bootstrapv3.Bootstrap{
		// The admin interface answers /ready (200 once Envoy is live) for
		// health checks; it can also stop Envoy, hence loopback by default.
		Admin: &bootstrapv3.Admin{Address: socketAddress(adminHost, adminPort)},
		StaticResources: &bootstrapv3.Bootstrap_StaticResources{
			Listeners: []*listenerv3.Listener{listener},
			Clusters:  slices.Concat([]*clusterv3.Cluster{extProc}, backendClusters(cfg, ups), models),
		},
	}, nil
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

// connectionManager leaves generate_request_id at its default (on). Its
// request_timeout bounds receiving the request only: it is disarmed once
// the request went upstream, so the routes' timeouts bound the answer.
// use_remote_address is set either way, so the file says which it is;
// internal_address_config stays unset: since Envoy 1.33 no client is then
// internal (an empty one would trust RFC 1918 addresses).
func connectionManager(cfg Config, ups []upstream) *hcmv3.HttpConnectionManager {
	return &hcmv3.HttpConnectionManager{
		StatPrefix:        statPrefix,
		CodecType:         hcmv3.HttpConnectionManager_AUTO,
		StreamIdleTimeout: durationpb.New(cfg.StreamIdleTimeout),
		RequestTimeout:    durationpb.New(cfg.RequestTimeout),
		UseRemoteAddress:  wrapperspb.Bool(cfg.UseRemoteAddress),
		XffNumTrustedHops: cfg.XffNumTrustedHops,
		AccessLog:         accessLogs(cfg),
		Tracing:           connectionTracing(cfg),
		LocalReplyConfig:  localReplyConfig(cfg.MetadataNamespace),
		// Clients never steer the router's retries or timeouts.
		EarlyHeaderMutationExtensions: earlyHeaderMutations(),
		// The ext_proc server sets x-request-id, its own id of the
		// request, on every answer it sees, and on the request for Envoy's
		// access log. Envoy's always_set_request_id_in_response would
		// overwrite it with the request's header, which is still the
		// client's on the answers the server gives at the request's
		// headers (conn_manager_utility.cc, mutateResponseHeaders).
		AlwaysSetRequestIdInResponse: false,
		// WebSocket handshakes reach the ext_proc server, which refuses
		// them with a 426 (the Responses API's WebSocket mode falls back
		// to HTTP at once on it); without this Envoy answers them 403
		// before any filter, which clients retry.
		UpgradeConfigs: []*hcmv3.HttpConnectionManager_UpgradeConfig{{UpgradeType: "websocket"}},
		RouteSpecifier: &hcmv3.HttpConnectionManager_RouteConfig{RouteConfig: routes(cfg, ups)},
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
	rs := fallbackRoutes(cfg)
	for _, up := range ups {
		for _, m := range up.models {
			rs = append(rs, backendRoutes(cfg, up, "/"+m.model, m.timeouts, exactHeader(routing.ModelHeader, m.model))...)
		}
		rs = append(rs, backendRoutes(cfg, up, "", up.timeouts)...)
	}
	rs = append(rs, notFoundRoute())
	return &routev3.RouteConfiguration{Name: statPrefix, VirtualHosts: []*routev3.VirtualHost{{
		Name: statPrefix, Domains: []string{"*"}, Routes: rs,
	}}}
}

// backendRoutes are the routes of a backend, or of one model on it (named
// by suffix and matched by extra): for streaming requests, when a stream
// idle timeout applies, and for the rest.
func backendRoutes(cfg Config, up upstream, suffix string, t routing.Timeouts, extra ...*routev3.HeaderMatcher) []*routev3.Route {
	var rs []*routev3.Route
	if t.StreamIdle > 0 {
		stream := backendRoute(cfg, up, t, append(extra, exactHeader(routing.StreamHeader, "1"))...)
		stream.Name = up.name + suffix + "/stream"
		rs = append(rs, stream)
	}
	t.StreamIdle = 0
	r := backendRoute(cfg, up, t, extra...)
	r.Name = up.name + suffix
	return append(rs, r)
}

// backendRoute has no route timeout, which would cut long generations and
// streams as a whole; the per-try timeouts bound the wait for the answer
// to start and every gap in it instead (router docs: per_try_timeout,
// per_try_idle_timeout). No retries yet: num_retries 0. The gateway's own
// headers stop at Envoy: request_headers_to_remove applies after routing.
func backendRoute(cfg Config, up upstream, t routing.Timeouts, extra ...*routev3.HeaderMatcher) *routev3.Route {
	ra := &routev3.RouteAction{
		ClusterSpecifier:     &routev3.RouteAction_Cluster{Cluster: up.name},
		Timeout:              durationpb.New(0),
		HostRewriteSpecifier: &routev3.RouteAction_HostRewriteLiteral{HostRewriteLiteral: up.authority()},
	}
	if t.ResponseHeaders > 0 || t.StreamIdle > 0 {
		ra.RetryPolicy = &routev3.RetryPolicy{NumRetries: wrapperspb.UInt32(0)}
		if t.ResponseHeaders > 0 {
			ra.RetryPolicy.PerTryTimeout = durationpb.New(t.ResponseHeaders)
		}
		if t.StreamIdle > 0 {
			ra.RetryPolicy.PerTryIdleTimeout = durationpb.New(t.StreamIdle)
		}
	}
	return &routev3.Route{
		Name: up.name,
		Match: &routev3.RouteMatch{
			PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"},
			Headers:       append([]*routev3.HeaderMatcher{exactHeader(cfg.RoutingHeader, up.name)}, extra...),
		},
		Action:                 &routev3.Route_Route{Route: ra},
		RequestHeadersToRemove: []string{cfg.RoutingHeader, routing.ModelHeader, routing.StreamHeader},
	}
}

func exactHeader(name, value string) *routev3.HeaderMatcher {
	return &routev3.HeaderMatcher{Name: name, HeaderMatchSpecifier: &routev3.HeaderMatcher_StringMatch{
		StringMatch: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: value}},
	}}
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
