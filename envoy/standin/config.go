package standin

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"time"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	upstreamsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"google.golang.org/protobuf/types/known/anypb"
)

// filterConfig is the ext_proc filter as the stand-in runs it.
type filterConfig struct {
	cluster           string
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
	addr  string // host:port
	tls   *tls.Config
	http2 bool
}

// plan is the part of the bootstrap the stand-in runs.
type plan struct {
	listen       string
	bufferLimit  int64
	idleTimeout  time.Duration
	routes       *routev3.RouteConfiguration
	extproc      *filterConfig // nil when there is no ext_proc filter
	suppressHdrs bool
	clusters     map[string]*cluster
}

func unsupported(format string, args ...any) error {
	return fmt.Errorf("standin: unsupported configuration: "+format, args...)
}

func compile(b *bootstrapv3.Bootstrap) (*plan, error) {
	sr := b.GetStaticResources()
	if len(sr.GetListeners()) != 1 || b.GetDynamicResources() != nil {
		return nil, unsupported("want exactly one static listener, got %d", len(sr.GetListeners()))
	}
	p := &plan{clusters: map[string]*cluster{}, bufferLimit: 1 << 20}
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
	if p.extproc != nil {
		c := p.clusters[p.extproc.cluster]
		if c == nil || !c.http2 {
			return nil, fmt.Errorf("standin: ext_proc cluster %q is missing or does not speak HTTP/2", p.extproc.cluster)
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

func (p *plan) hcm(hcm *hcmv3.HttpConnectionManager) error {
	if hcm.GetRouteConfig() == nil {
		return unsupported("only an inline route_config is supported (no RDS, no scoped routes)")
	}
	if hcm.GetLocalReplyConfig() != nil {
		return unsupported("local_reply_config")
	}
	p.routes = hcm.GetRouteConfig()
	p.idleTimeout = 5 * time.Minute
	if d := hcm.GetStreamIdleTimeout(); d != nil {
		p.idleTimeout = d.AsDuration()
	}
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
		fc, err := compileExtProc(ep)
		p.extproc = fc
		return err
	}
	return unsupported("more than one ext_proc filter")
}

func compileExtProc(ep *extprocv3.ExternalProcessor) (*filterConfig, error) {
	switch {
	case ep.GetGrpcService().GetEnvoyGrpc() == nil:
		return nil, unsupported("ext_proc: only grpc_service.envoy_grpc is supported")
	case ep.GetObservabilityMode(), ep.GetHttpService() != nil, ep.GetMutationRules() != nil,
		ep.GetForwardRules() != nil, len(ep.GetRequestAttributes()) > 0, len(ep.GetResponseAttributes()) > 0,
		ep.GetDisableImmediateResponse(), ep.GetSendBodyWithoutWaitingForHeaderResponse(),
		ep.GetRouteCacheAction() != extprocv3.ExternalProcessor_DEFAULT, ep.GetDisableClearRouteCache(),
		len(ep.GetAllowedOverrideModes()) > 0:
		return nil, unsupported("ext_proc: observability mode, http_service, mutation_rules, forward_rules, attributes, " +
			"disable_immediate_response, send_body_without_waiting_for_header_response, route_cache_action, " +
			"disable_clear_route_cache and allowed_override_modes are not implemented")
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

func compileCluster(c *clusterv3.Cluster) (*cluster, error) {
	switch c.GetType() {
	case clusterv3.Cluster_STATIC, clusterv3.Cluster_STRICT_DNS, clusterv3.Cluster_LOGICAL_DNS:
	default:
		return nil, unsupported("cluster %q: type %v", c.GetName(), c.GetType())
	}
	eps := c.GetLoadAssignment().GetEndpoints()
	if len(eps) != 1 || len(eps[0].GetLbEndpoints()) != 1 {
		return nil, unsupported("cluster %q: want exactly one endpoint", c.GetName())
	}
	sa := eps[0].GetLbEndpoints()[0].GetEndpoint().GetAddress().GetSocketAddress()
	if sa == nil {
		return nil, unsupported("cluster %q: endpoint without a socket address", c.GetName())
	}
	cl := &cluster{name: c.GetName(), addr: net.JoinHostPort(sa.GetAddress(), strconv.Itoa(int(sa.GetPortValue())))}
	cl.http2 = c.GetHttp2ProtocolOptions() != nil || http2Options(c)
	if ts := c.GetTransportSocket(); ts != nil {
		cfg, err := tlsConfig(c.GetName(), ts.GetTypedConfig())
		if err != nil {
			return nil, err
		}
		cl.tls = cfg
	}
	return cl, nil
}

func http2Options(c *clusterv3.Cluster) bool {
	a := c.GetTypedExtensionProtocolOptions()["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"]
	o := &upstreamsv3.HttpProtocolOptions{}
	return a != nil && a.UnmarshalTo(o) == nil && o.GetExplicitHttpConfig().GetHttp2ProtocolOptions() != nil
}

func tlsConfig(name string, typed *anypb.Any) (*tls.Config, error) {
	ctx := &tlsv3.UpstreamTlsContext{}
	if typed == nil || typed.UnmarshalTo(ctx) != nil {
		return nil, unsupported("cluster %q: only the UpstreamTlsContext transport socket is implemented", name)
	}
	cfg := &tls.Config{ServerName: ctx.GetSni(), MinVersion: tls.VersionTLS12}
	vc := ctx.GetCommonTlsContext().GetValidationContext()
	if vc == nil {
		return nil, unsupported("cluster %q: TLS without validation_context (Envoy would not verify the upstream)", name)
	}
	if file := vc.GetTrustedCa().GetFilename(); file != "" {
		pem, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("standin: cluster %q: reading trusted CA: %w", name, err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, errors.New("standin: cluster " + name + ": no certificates in " + file)
		}
	}
	return cfg, nil
}

func (p *plan) checkRoutes() error {
	for _, vh := range p.routes.GetVirtualHosts() {
		for _, r := range vh.GetRoutes() {
			if err := checkRoute(r, p.clusters); err != nil {
				return err
			}
		}
	}
	return nil
}

func checkRoute(r *routev3.Route, clusters map[string]*cluster) error {
	m := r.GetMatch()
	if m.GetPrefix() == "" && m.GetPath() == "" || len(m.GetQueryParameters()) > 0 || m.GetRuntimeFraction() != nil {
		return unsupported("route %q: only prefix or path matches with header matchers", r.GetName())
	}
	for _, h := range m.GetHeaders() {
		if h.GetStringMatch().GetExact() == "" && !h.GetPresentMatch() || h.GetInvertMatch() {
			return unsupported("route %q: header matcher %q (exact and present are implemented)", r.GetName(), h.GetName())
		}
	}
	switch {
	case r.GetDirectResponse() != nil:
		return nil
	case r.GetRoute() != nil:
		ra := r.GetRoute()
		if clusters[ra.GetCluster()] == nil {
			return fmt.Errorf("standin: route %q: unknown cluster %q", r.GetName(), ra.GetCluster())
		}
		if ra.GetRetryPolicy() != nil || ra.GetRegexRewrite() != nil || ra.GetAutoHostRewrite() != nil {
			return unsupported("route %q: retries, regex rewrites and auto host rewrite", r.GetName())
		}
		return nil
	}
	return unsupported("route %q: only route and direct_response actions", r.GetName())
}
