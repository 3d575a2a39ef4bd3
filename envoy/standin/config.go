package standin

import (
	"crypto/tls"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	earlyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/http/early_header_mutation/header_mutation/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// filterConfig is the ext_proc filter as the stand-in runs it.
type filterConfig struct {
	cluster           string
	attrs             []attribute // request_attributes (upstream filters only)
	forward           []string    // metadata_options.forwarding_namespaces.untyped
	mode              *extprocv3.ProcessingMode
	allowModeOverride bool
	failureModeAllow  bool
	messageTimeout    time.Duration
	maxMessageTimeout time.Duration
	namespaces        map[string]bool
	statusOnError     int
}

// cluster is an upstream as the stand-in reaches it.
type cluster struct {
	name  string
	addr  string // the first host's host:port (the gRPC target of an ext_proc cluster)
	tls   *tls.Config
	http2 bool
	// autoHostSNI is UpstreamTlsContext.auto_host_sni: each host's
	// hostname is its SNI (and, as Go verifies, the name its certificate
	// must match).
	autoHostSNI bool
	lb          *balancer
	// strictDNS is a STRICT_DNS cluster, with its dns_lookup_family.
	strictDNS bool
	family    clusterv3.Cluster_DnsLookupFamily
	// upstream is the ext_proc filter of the cluster's upstream HTTP
	// filter chain (HttpProtocolOptions.http_filters), nil when the chain
	// is the codec alone.
	upstream *filterConfig
	// maxRetries is the DEFAULT priority's max_retries circuit breaker
	// (default 3): retries in progress at once; retries counts them. A
	// retry_budget replaces it (resource_manager_impl.h, RetryBudgetImpl):
	// budgetPercent of the requests in flight, at least minRetries.
	maxRetries    int64
	budget        bool
	budgetPercent float64
	minRetries    int64
	retries       atomic.Int64
	// maxInFlight is what the circuit breakers let through at once:
	// max_requests, and for HTTP/1 also no more than max_connections plus
	// max_pending_requests (each request needs a connection, the rest
	// wait). Envoy's defaults are 1024 each.
	maxInFlight int64
	inFlight    atomic.Int64
}

// acquire takes one of the cluster's circuit-breaker slots; false means
// overflow. release gives it back.
func (c *cluster) acquire() bool {
	for {
		n := c.inFlight.Load()
		if n >= c.maxInFlight {
			return false
		}
		if c.inFlight.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

func (c *cluster) release() { c.inFlight.Add(-1) }

// acquireRetry takes a max_retries slot; false means overflow.
func (c *cluster) acquireRetry() bool {
	for {
		n := c.retries.Load()
		limit := c.maxRetries
		if c.budget {
			limit = max(int64(c.budgetPercent/100*float64(c.inFlight.Load())), c.minRetries)
		}
		if n >= limit {
			return false
		}
		if c.retries.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

func (c *cluster) releaseRetry() { c.retries.Add(-1) }

// plan is the part of the bootstrap the stand-in runs.
type plan struct {
	listen         string
	bufferLimit    int64
	idleTimeout    time.Duration // stream_idle_timeout; 0 disables it
	requestTimeout time.Duration // request_timeout; 0 disables it
	// alwaysSetRequestID is always_set_request_id_in_response: every
	// answer, a local reply too, carries the request's x-request-id.
	alwaysSetRequestID bool
	routes             *routev3.RouteConfiguration
	retryPolicies      map[*routev3.Route]*retryPolicy
	extproc            *filterConfig // nil when there is no ext_proc filter
	suppressHdrs       bool
	clusters           map[string]*cluster
	localReply         *localReplyConfig
	accessLog          *accessLogConfig // nil without one
	// useRemoteAddress and xffTrustedHops decide the client address and
	// the x-forwarded-for header (see requestHeaders).
	useRemoteAddress bool
	xffTrustedHops   uint32
	// earlyRemove are the headers the early header mutations remove.
	earlyRemove []string
	// upgrades are the upgrade types upgrade_configs allows, lower-case.
	upgrades []string
	// internal are internal_address_config's cidr_ranges; internalAll
	// says an internal_address_config without any, which counts RFC 1918,
	// RFC 4193 and loopback addresses as internal. Without the config no
	// client is internal.
	internal    []*net.IPNet
	internalAll bool
}

// isInternal reports whether the trusted client address is internal
// (http_connection_manager/config.h, InternalAddressConfig;
// network/utility.cc, isInternalAddress).
func (p *plan) isInternal(addr string) bool {
	ip := net.ParseIP(addr)
	switch {
	case ip == nil:
		return false
	case len(p.internal) > 0:
		for _, n := range p.internal {
			if n.Contains(ip) {
				return true
			}
		}
		return false
	case p.internalAll:
		return ip.IsPrivate() || ip.IsLoopback()
	}
	return false
}

func unsupported(format string, args ...any) error {
	return fmt.Errorf("standin: unsupported configuration: "+format, args...)
}

func compile(b *bootstrapv3.Bootstrap) (*plan, error) {
	sr := b.GetStaticResources()
	if len(sr.GetListeners()) != 1 || b.GetDynamicResources() != nil {
		return nil, unsupported("want exactly one static listener, got %d", len(sr.GetListeners()))
	}
	if extra := extraFields(b, "static_resources", "admin"); len(extra) > 0 {
		return nil, unsupported("bootstrap %v", extra)
	}
	if extra := extraFields(sr, "listeners", "clusters"); len(extra) > 0 {
		return nil, unsupported("static_resources %v", extra)
	}
	// The admin interface is not served: its address is only checked.
	if a := b.GetAdmin(); a != nil && (len(extraFields(a, "address")) > 0 || a.GetAddress().GetSocketAddress() == nil) {
		return nil, unsupported("admin: only a socket address (the stand-in serves no admin interface)")
	}
	p := &plan{clusters: map[string]*cluster{}, bufferLimit: 1 << 20, retryPolicies: map[*routev3.Route]*retryPolicy{}}
	if err := p.listener(sr.GetListeners()[0]); err != nil {
		return nil, err
	}
	for _, c := range sr.GetClusters() {
		cl, err := compileCluster(c)
		if err != nil {
			return nil, err
		}
		p.clusters[cl.name] = cl
	}
	fcs := []*filterConfig{p.extproc}
	for _, c := range p.clusters {
		fcs = append(fcs, c.upstream)
	}
	for _, fc := range fcs {
		if fc == nil {
			continue
		}
		c := p.clusters[fc.cluster]
		if c == nil || !c.http2 {
			return nil, fmt.Errorf("standin: ext_proc cluster %q is missing or does not speak HTTP/2", fc.cluster)
		}
		if len(c.lb.hosts) != 1 {
			return nil, unsupported("ext_proc cluster %q: want exactly one endpoint", fc.cluster)
		}
	}
	return p, p.checkRoutes()
}

func (p *plan) listener(l *listenerv3.Listener) error {
	sa := l.GetAddress().GetSocketAddress()
	if sa == nil || len(l.GetFilterChains()) != 1 || len(l.GetFilterChains()[0].GetFilters()) != 1 || len(l.GetListenerFilters()) > 0 {
		return unsupported("listener %q: want a socket address and one filter chain with one filter", l.GetName())
	}
	p.listen = net.JoinHostPort(sa.GetAddress(), strconv.Itoa(int(sa.GetPortValue())))
	if v := l.GetPerConnectionBufferLimitBytes(); v != nil {
		p.bufferLimit = int64(v.GetValue())
	}
	hcm := &hcmv3.HttpConnectionManager{}
	if err := l.GetFilterChains()[0].GetFilters()[0].GetTypedConfig().UnmarshalTo(hcm); err != nil {
		return unsupported("listener filter is not an HTTP connection manager: %v", err)
	}
	return p.hcm(hcm)
}

// hcmFields are the connection manager fields the stand-in implements,
// or that do not change what it does (stat_prefix, codec_type).
var hcmFields = []string{"stat_prefix", "codec_type", "route_config", "http_filters", "stream_idle_timeout",
	"request_timeout", "local_reply_config", "always_set_request_id_in_response", "access_log",
	"use_remote_address", "xff_num_trusted_hops", "early_header_mutation_extensions", "internal_address_config",
	"upgrade_configs"}

func (p *plan) hcm(hcm *hcmv3.HttpConnectionManager) error {
	if hcm.GetRouteConfig() == nil {
		return unsupported("only an inline route_config is supported (no RDS, no scoped routes)")
	}
	if extra := extraFields(hcm, hcmFields...); len(extra) > 0 {
		return unsupported("HTTP connection manager %v", extra)
	}
	if hcm.GetCodecType() == hcmv3.HttpConnectionManager_HTTP3 {
		return unsupported("HTTP connection manager codec_type HTTP3")
	}
	lr, err := compileLocalReply(hcm.GetLocalReplyConfig())
	if err != nil {
		return err
	}
	p.localReply = lr
	if p.accessLog, err = compileAccessLog(hcm.GetAccessLog()); err != nil {
		return err
	}
	p.useRemoteAddress = hcm.GetUseRemoteAddress().GetValue()
	p.xffTrustedHops = hcm.GetXffNumTrustedHops()
	if p.earlyRemove, err = compileEarlyMutations(hcm.GetEarlyHeaderMutationExtensions()); err != nil {
		return err
	}
	for _, u := range hcm.GetUpgradeConfigs() {
		if len(u.GetFilters()) > 0 {
			return unsupported("upgrade_configs %q with filters of its own", u.GetUpgradeType())
		}
		if u.GetEnabled() == nil || u.GetEnabled().GetValue() {
			p.upgrades = append(p.upgrades, strings.ToLower(u.GetUpgradeType()))
		}
	}
	if iac := hcm.GetInternalAddressConfig(); iac != nil {
		if extra := extraFields(iac, "cidr_ranges"); len(extra) > 0 {
			return unsupported("internal_address_config %v (cidr_ranges are implemented)", extra)
		}
		p.internalAll = len(iac.GetCidrRanges()) == 0
		for _, r := range iac.GetCidrRanges() {
			_, n, err := net.ParseCIDR(fmt.Sprintf("%s/%d", r.GetAddressPrefix(), r.GetPrefixLen().GetValue()))
			if err != nil {
				return fmt.Errorf("standin: internal_address_config: %w", err)
			}
			p.internal = append(p.internal, n)
		}
	}
	p.routes = hcm.GetRouteConfig()
	p.idleTimeout = 5 * time.Minute
	if d := hcm.GetStreamIdleTimeout(); d != nil {
		p.idleTimeout = d.AsDuration()
	}
	p.requestTimeout = hcm.GetRequestTimeout().AsDuration()
	p.alwaysSetRequestID = hcm.GetAlwaysSetRequestIdInResponse()
	filters := hcm.GetHttpFilters()
	for i, f := range filters {
		last := i == len(filters)-1
		if err := p.httpFilter(f, last); err != nil {
			return err
		}
	}
	if len(filters) == 0 || filters[len(filters)-1].GetName() != "envoy.filters.http.router" {
		return unsupported("the last HTTP filter must be the router")
	}
	return nil
}

func (p *plan) httpFilter(f *hcmv3.HttpFilter, last bool) error {
	if f.GetDisabled() || f.GetIsOptional() {
		return unsupported("disabled or optional filter %q", f.GetName())
	}
	switch {
	case last:
		r := &routerv3.Router{}
		if err := f.GetTypedConfig().UnmarshalTo(r); err != nil {
			return unsupported("last filter %q is not the router", f.GetName())
		}
		if len(r.GetUpstreamHttpFilters()) > 0 {
			return unsupported("router upstream_http_filters")
		}
		p.suppressHdrs = r.GetSuppressEnvoyHeaders()
		return nil
	case p.extproc == nil:
		ep := &extprocv3.ExternalProcessor{}
		if err := f.GetTypedConfig().UnmarshalTo(ep); err != nil {
			return unsupported("HTTP filter %q (only ext_proc and the router are implemented)", f.GetName())
		}
		fc, err := compileExtProc(ep, false)
		p.extproc = fc
		return err
	}
	return unsupported("more than one ext_proc filter")
}

// compileExtProc compiles a router-level ext_proc filter, or one in a
// cluster's upstream chain (upstream), which may ask for request
// attributes but implements fewer modes.
func compileExtProc(ep *extprocv3.ExternalProcessor, upstream bool) (*filterConfig, error) {
	switch {
	case ep.GetGrpcService().GetEnvoyGrpc() == nil:
		return nil, unsupported("ext_proc: only grpc_service.envoy_grpc is supported")
	case !upstream && len(ep.GetRequestAttributes()) > 0:
		return nil, unsupported("ext_proc: request_attributes are implemented in upstream filter chains only")
	case upstream && ep.GetAllowModeOverride():
		return nil, unsupported("upstream ext_proc: allow_mode_override is not implemented in the upstream filter chain")
	case upstream && ep.GetProcessingMode().GetResponseBodyMode() != extprocv3.ProcessingMode_NONE:
		return nil, unsupported("upstream ext_proc: response body mode %v (NONE is implemented in the upstream filter chain)",
			ep.GetProcessingMode().GetResponseBodyMode())
	case len(ep.GetMetadataOptions().GetForwardingNamespaces().GetTyped()) > 0,
		ep.GetMetadataOptions().GetClusterMetadataForwardingNamespaces() != nil:
		return nil, unsupported("ext_proc: typed and cluster metadata forwarding namespaces are not implemented")
	case ep.GetObservabilityMode(), ep.GetHttpService() != nil, ep.GetMutationRules() != nil,
		ep.GetForwardRules() != nil, len(ep.GetResponseAttributes()) > 0,
		ep.GetDisableImmediateResponse(), ep.GetSendBodyWithoutWaitingForHeaderResponse(),
		ep.GetRouteCacheAction() != extprocv3.ExternalProcessor_DEFAULT, ep.GetDisableClearRouteCache(),
		len(ep.GetAllowedOverrideModes()) > 0, ep.GetAllowContentLengthHeader(), ep.GetProcessingRequestModifier() != nil,
		ep.GetOnProcessingResponse() != nil:
		return nil, unsupported("ext_proc: observability mode, http_service, mutation_rules, forward_rules, attributes, " +
			"disable_immediate_response, send_body_without_waiting_for_header_response, route_cache_action, " +
			"disable_clear_route_cache, allowed_override_modes, allow_content_length_header, processing_request_modifier " +
			"and on_processing_response are not implemented")
	}
	mode := ep.GetProcessingMode()
	if mode == nil {
		mode = &extprocv3.ProcessingMode{}
	}
	if err := checkModes(mode); err != nil {
		return nil, err
	}
	fc := &filterConfig{cluster: ep.GetGrpcService().GetEnvoyGrpc().GetClusterName(), mode: mode,
		allowModeOverride: ep.GetAllowModeOverride(), failureModeAllow: ep.GetFailureModeAllow(),
		messageTimeout: 200 * time.Millisecond, namespaces: map[string]bool{}, statusOnError: 500}
	if d := ep.GetMessageTimeout(); d != nil {
		fc.messageTimeout = d.AsDuration()
	}
	if d := ep.GetMaxMessageTimeout(); d != nil {
		fc.maxMessageTimeout = d.AsDuration()
	}
	if c := int(ep.GetStatusOnError().GetCode()); c >= 400 && c <= 599 {
		fc.statusOnError = c
	}
	for _, ns := range ep.GetMetadataOptions().GetReceivingNamespaces().GetUntyped() {
		fc.namespaces[ns] = true
	}
	fc.forward = ep.GetMetadataOptions().GetForwardingNamespaces().GetUntyped()
	for _, expr := range ep.GetRequestAttributes() {
		a, err := compileAttribute(expr)
		if err != nil {
			return nil, err
		}
		fc.attrs = append(fc.attrs, a)
	}
	return fc, nil
}

func checkModes(m *extprocv3.ProcessingMode) error {
	if m.GetRequestTrailerMode() == extprocv3.ProcessingMode_SEND || m.GetResponseTrailerMode() == extprocv3.ProcessingMode_SEND {
		return unsupported("ext_proc: trailer processing")
	}
	switch m.GetRequestBodyMode() {
	case extprocv3.ProcessingMode_NONE, extprocv3.ProcessingMode_BUFFERED:
	default:
		return unsupported("ext_proc: request body mode %v (NONE and BUFFERED are implemented)", m.GetRequestBodyMode())
	}
	switch m.GetResponseBodyMode() {
	case extprocv3.ProcessingMode_NONE, extprocv3.ProcessingMode_BUFFERED, extprocv3.ProcessingMode_STREAMED:
	default:
		return unsupported("ext_proc: response body mode %v (NONE, BUFFERED and STREAMED are implemented)", m.GetResponseBodyMode())
	}
	return nil
}

func (p *plan) checkRoutes() error {
	if extra := extraFields(p.routes, "name", "virtual_hosts", "validate_clusters"); len(extra) > 0 {
		return unsupported("route_config: %v", extra)
	}
	for _, vh := range p.routes.GetVirtualHosts() {
		if extra := extraFields(vh, "name", "domains", "routes"); len(extra) > 0 {
			return unsupported("virtual host %q: %v (retries, header edits and the like are implemented per route only)", vh.GetName(), extra)
		}
		for _, r := range vh.GetRoutes() {
			if err := p.checkRoute(r); err != nil {
				return err
			}
		}
	}
	return nil
}

// extraFields lists the fields set in m that are not in allowed.
func extraFields(m proto.Message, allowed ...string) []string {
	var out []string
	m.ProtoReflect().Range(func(fd protoreflect.FieldDescriptor, _ protoreflect.Value) bool {
		if !slices.Contains(allowed, string(fd.Name())) {
			out = append(out, string(fd.Name()))
		}
		return true
	})
	return out
}

func (p *plan) checkRoute(r *routev3.Route) error {
	m := r.GetMatch()
	if m.GetPrefix() == "" && m.GetPath() == "" || len(m.GetQueryParameters()) > 0 || m.GetRuntimeFraction() != nil {
		return unsupported("route %q: only prefix or path matches with header matchers", r.GetName())
	}
	for _, h := range m.GetHeaders() {
		if h.GetStringMatch().GetExact() == "" && !h.GetPresentMatch() || h.GetInvertMatch() {
			return unsupported("route %q: header matcher %q (exact and present are implemented)", r.GetName(), h.GetName())
		}
	}
	if extra := extraFields(r, "name", "match", "route", "direct_response", "response_headers_to_add",
		"request_headers_to_remove", "metadata"); len(extra) > 0 {
		return unsupported("route %q: %v", r.GetName(), extra)
	}
	for _, name := range r.GetRequestHeadersToRemove() {
		if n := strings.ToLower(name); strings.HasPrefix(n, ":") || n == "host" || n == "" {
			return fmt.Errorf("standin: route %q: request_headers_to_remove %q: Envoy refuses to remove pseudo-headers and host", r.GetName(), name)
		}
	}
	switch {
	case r.GetDirectResponse() != nil:
		return checkDirectResponse(r)
	case r.GetRoute() != nil:
		ra := r.GetRoute()
		if p.clusters[ra.GetCluster()] == nil {
			return fmt.Errorf("standin: route %q: unknown cluster %q", r.GetName(), ra.GetCluster())
		}
		if len(r.GetResponseHeadersToAdd()) > 0 {
			return unsupported("route %q: response_headers_to_add (implemented for direct_response routes only)", r.GetName())
		}
		if extra := extraFields(ra, "cluster", "timeout", "host_rewrite_literal", "auto_host_rewrite", "prefix_rewrite",
			"retry_policy"); len(extra) > 0 {
			return unsupported("route %q: route action %v", r.GetName(), extra)
		}
		rp, err := compileRetryPolicy(r.GetName(), ra.GetRetryPolicy())
		p.retryPolicies[r] = rp
		return err
	}
	return unsupported("route %q: only route and direct_response actions", r.GetName())
}

func checkDirectResponse(r *routev3.Route) error {
	dr := r.GetDirectResponse()
	_, inline := dr.GetBody().GetSpecifier().(*corev3.DataSource_InlineString)
	if dr.GetBodyFormat() != nil || dr.GetBody() != nil && !inline {
		return unsupported("route %q: direct_response body other than inline_string", r.GetName())
	}
	for _, o := range r.GetResponseHeadersToAdd() {
		//lint:ignore SA1019 the deprecated append is what Envoy reads in ext_proc mutations; here it is refused
		if o.GetAppend() != nil || len(o.GetHeader().GetRawValue()) > 0 || strings.Contains(o.GetHeader().GetValue(), "%") {
			return unsupported("route %q: response_headers_to_add %q (append, raw_value and format operators are not implemented)", r.GetName(), o.GetHeader().GetKey())
		}
	}
	return nil
}

// compileEarlyMutations reads the connection manager's early header
// mutations: the header_mutation extension removing headers by name
// (header_mutation.cc, RemoveMutation). Appending and remove_on_match are
// not implemented.
func compileEarlyMutations(exts []*corev3.TypedExtensionConfig) ([]string, error) {
	var names []string
	for _, e := range exts {
		hm := &earlyv3.HeaderMutation{}
		if e.GetTypedConfig() == nil || e.GetTypedConfig().UnmarshalTo(hm) != nil {
			return nil, unsupported("early header mutation %q (only the header_mutation extension is implemented)", e.GetName())
		}
		if len(hm.GetMutations()) == 0 {
			return nil, fmt.Errorf("standin: early header mutation %q: mutations must have at least 1 item", e.GetName())
		}
		for _, m := range hm.GetMutations() {
			name := m.GetRemove()
			if name == "" {
				return nil, unsupported("early header mutation %q: %v (only remove is implemented)", e.GetName(), m)
			}
			names = append(names, name)
		}
	}
	return names, nil
}
