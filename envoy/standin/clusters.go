package standin

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"slices"
	"strconv"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	upstreamcodecv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/upstream_codec/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	upstreamsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// clusterFields are the cluster fields the stand-in implements, or
// accepts without doing what Envoy does: connect_timeout (its dialer waits
// 5s), the buffer limit, and health checks (see checkHealthChecks).
// dns_lookup_family picks the addresses of STRICT_DNS hosts (dns.go); a
// LOGICAL_DNS host is dialed by name, and Go's resolver picks.
var clusterFields = []string{"name", "type", "connect_timeout", "per_connection_buffer_limit_bytes", "load_assignment",
	"typed_extension_protocol_options", "transport_socket", "dns_lookup_family", "http2_protocol_options",
	"circuit_breakers", "health_checks", "lb_policy", "common_lb_config", "outlier_detection", "transport_socket_matches"}

const httpProtocolOptionsKey = "envoy.extensions.upstreams.http.v3.HttpProtocolOptions"

func compileCluster(c *clusterv3.Cluster) (*cluster, error) {
	if extra := extraFields(c, clusterFields...); len(extra) > 0 {
		return nil, unsupported("cluster %q: %v", c.GetName(), extra)
	}
	dns := false
	switch c.GetType() {
	case clusterv3.Cluster_STATIC:
	case clusterv3.Cluster_STRICT_DNS, clusterv3.Cluster_LOGICAL_DNS:
		dns = true
	default:
		return nil, unsupported("cluster %q: type %v", c.GetName(), c.GetType())
	}
	cl := &cluster{name: c.GetName(), strictDNS: c.GetType() == clusterv3.Cluster_STRICT_DNS, family: c.GetDnsLookupFamily()}
	b, err := compileEndpoints(c, dns)
	if err != nil {
		return nil, err
	}
	cl.lb, cl.addr = b, b.hosts[0].addr
	switch c.GetLbPolicy() {
	case clusterv3.Cluster_ROUND_ROBIN:
	case clusterv3.Cluster_LEAST_REQUEST:
		b.policy = leastRequest
	default:
		return nil, unsupported("cluster %q: lb_policy %v (ROUND_ROBIN and LEAST_REQUEST are implemented)", c.GetName(), c.GetLbPolicy())
	}
	if clc := c.GetCommonLbConfig(); clc != nil {
		if extra := extraFields(clc, "healthy_panic_threshold"); len(extra) > 0 {
			return nil, unsupported("cluster %q: common_lb_config %v", c.GetName(), extra)
		}
		if t := clc.GetHealthyPanicThreshold(); t != nil {
			// PROTOBUF_PERCENT_TO_ROUNDED_INTEGER_OR_DEFAULT
			b.panicThreshold = uint64(min(100, max(0, math.Round(t.GetValue()))))
		}
	}
	if o := c.GetOutlierDetection(); o != nil {
		if err := checkOutlier(c.GetName(), o, len(b.hosts)); err != nil {
			return nil, err
		}
		b.od = &detector{cfg: compileOutlier(o), hosts: b.hosts}
	}
	if cl.http2, cl.upstream, err = protocolOptions(c); err != nil {
		return nil, err
	}
	if err := circuitBreakers(c, cl); err != nil {
		return nil, err
	}
	if err := checkHealthChecks(c, cl.http2, len(b.hosts) > 1 || c.GetCommonLbConfig().GetHealthyPanicThreshold() != nil); err != nil {
		return nil, err
	}
	if ts := c.GetTransportSocket(); ts != nil {
		if cl.tls, cl.autoHostSNI, err = tlsConfig(c.GetName(), ts.GetTypedConfig()); err != nil {
			return nil, err
		}
	}
	return cl, transportSocketMatches(c, cl)
}

// transportMatchKey is the endpoint metadata namespace transport socket
// matches look at.
const transportMatchKey = "envoy.transport_socket_match"

// transportSocketMatches gives each host the first transport_socket_matches
// entry whose match labels all equal the endpoint's
// filter_metadata["envoy.transport_socket_match"] (an empty match matches
// any), else the cluster's transport_socket (transport_socket_match_impl.cc,
// TransportSocketMatcherImpl::resolve; Config::Metadata::metadataLabelMatch).
func transportSocketMatches(c *clusterv3.Cluster, cl *cluster) error {
	type match struct {
		labels  map[string]*structpb.Value
		tls     *tls.Config
		autoSNI bool
	}
	var ms []match
	for _, m := range c.GetTransportSocketMatches() {
		cfg, auto, err := tlsConfig(c.GetName(), m.GetTransportSocket().GetTypedConfig())
		if err != nil {
			return err
		}
		ms = append(ms, match{m.GetMatch().GetFields(), cfg, auto})
	}
	for _, h := range cl.lb.hosts {
		h.tls, h.autoSNI = cl.tls, cl.autoHostSNI
		got := h.metadata.GetFilterMetadata()[transportMatchKey].GetFields()
		for _, m := range ms {
			ok := true
			for k, v := range m.labels {
				ok = ok && got[k] != nil && proto.Equal(got[k], v)
			}
			if ok {
				h.tls, h.autoSNI = m.tls, m.autoSNI
				break
			}
		}
	}
	return nil
}

// compileEndpoints builds the hosts by priority (upstream_impl.cc,
// PriorityStateManager): one host per LbEndpoint, in the priority of its
// LocalityLbEndpoints, with its metadata, weight and hostname. Locality
// weights are accepted and, as in Envoy without locality weighted load
// balancing, ignored.
func compileEndpoints(c *clusterv3.Cluster, dns bool) (*balancer, error) {
	la := c.GetLoadAssignment()
	b := &balancer{overprovisioning: 140, panicThreshold: 50, sources: map[hostSource]*pickState{}}
	if extra := extraFields(la, "cluster_name", "endpoints", "policy"); len(extra) > 0 {
		return nil, unsupported("cluster %q: load_assignment %v", c.GetName(), extra)
	}
	if pol := la.GetPolicy(); pol != nil {
		if extra := extraFields(pol, "overprovisioning_factor"); len(extra) > 0 {
			return nil, unsupported("cluster %q: load_assignment policy %v", c.GetName(), extra)
		}
		if f := pol.GetOverprovisioningFactor(); f != nil {
			b.overprovisioning = uint64(f.GetValue())
		}
	}
	for _, lle := range la.GetEndpoints() {
		if extra := extraFields(lle, "locality", "lb_endpoints", "load_balancing_weight", "priority"); len(extra) > 0 {
			return nil, unsupported("cluster %q: locality endpoints %v", c.GetName(), extra)
		}
		p := int(lle.GetPriority())
		for len(b.priorities) <= p {
			b.priorities = append(b.priorities, nil)
		}
		for _, le := range lle.GetLbEndpoints() {
			h, err := compileHost(c.GetName(), le, dns)
			if err != nil {
				return nil, err
			}
			h.priority = p
			b.priorities[p] = append(b.priorities[p], h)
			b.hosts = append(b.hosts, h)
		}
	}
	switch {
	case len(b.hosts) == 0:
		return nil, unsupported("cluster %q: want at least one endpoint", c.GetName())
	case c.GetType() == clusterv3.Cluster_LOGICAL_DNS && (len(la.GetEndpoints()) != 1 || len(b.hosts) != 1):
		return nil, fmt.Errorf("standin: cluster %q: LOGICAL_DNS clusters must have a single locality_lb_endpoint and a single lb_endpoint", c.GetName())
	}
	return b, nil
}

func compileHost(cluster string, le *endpointv3.LbEndpoint, dns bool) (*host, error) {
	if extra := extraFields(le, "endpoint", "metadata", "load_balancing_weight"); len(extra) > 0 {
		return nil, unsupported("cluster %q: lb endpoint %v", cluster, extra)
	}
	ep := le.GetEndpoint()
	if extra := extraFields(ep, "address", "hostname"); len(extra) > 0 {
		return nil, unsupported("cluster %q: endpoint %v", cluster, extra)
	}
	sa := ep.GetAddress().GetSocketAddress()
	if sa == nil {
		return nil, unsupported("cluster %q: endpoint without a socket address", cluster)
	}
	if len(le.GetMetadata().GetTypedFilterMetadata()) > 0 {
		return nil, unsupported("cluster %q: endpoint typed_filter_metadata", cluster)
	}
	h := &host{addr: net.JoinHostPort(sa.GetAddress(), strconv.Itoa(int(sa.GetPortValue()))), hostname: ep.GetHostname(),
		metadata: le.GetMetadata(), weight: 1}
	if h.hostname == "" && dns {
		h.hostname = sa.GetAddress()
	}
	if w := le.GetLoadBalancingWeight(); w != nil {
		h.weight = uint64(w.GetValue())
	}
	return h, nil
}

// outlierFields are the OutlierDetection fields the stand-in runs, and
// those of detectors it does not implement, accepted when they cannot act
// (checkOutlier).
var outlierFields = []string{"consecutive_5xx", "interval", "base_ejection_time", "max_ejection_percent",
	"enforcing_consecutive_5xx", "consecutive_gateway_failure", "enforcing_consecutive_gateway_failure",
	"split_external_local_origin_errors", "consecutive_local_origin_failure", "enforcing_consecutive_local_origin_failure",
	"max_ejection_time", "max_ejection_time_jitter", "always_eject_one_host",
	"enforcing_success_rate", "success_rate_minimum_hosts", "success_rate_request_volume", "success_rate_stdev_factor",
	"enforcing_local_origin_success_rate", "failure_percentage_threshold", "enforcing_failure_percentage",
	"enforcing_failure_percentage_local_origin", "failure_percentage_minimum_hosts", "failure_percentage_request_volume"}

// checkOutlier refuses what the stand-in does not run: success-rate and
// failure-percentage detection can only act with at least their minimum
// number of hosts (processSuccessRateEjections), so with fewer hosts, or
// not enforced, they are accepted.
func checkOutlier(name string, o *clusterv3.OutlierDetection, hosts int) error {
	if extra := extraFields(o, outlierFields...); len(extra) > 0 {
		return unsupported("cluster %q: outlier_detection %v", name, extra)
	}
	cfg := compileOutlier(o)
	if cfg.maxEjection < cfg.baseEjection {
		return fmt.Errorf("standin: cluster %q: outlier detector's max_ejection_time cannot be smaller than base_ejection_time", name)
	}
	if cfg.interval <= 0 {
		return fmt.Errorf("standin: cluster %q: outlier_detection interval must be greater than 0", name)
	}
	successRate := cfg.enforcingSuccessRate > 0 || cfg.split && cfg.enforcingLocalRate > 0
	failurePct := cfg.enforcingFailurePct > 0 || cfg.split && cfg.enforcingFailureLocal > 0
	if successRate && uint64(hosts) >= cfg.successRateMinHosts || failurePct && uint64(hosts) >= cfg.failurePctMinHosts {
		return unsupported("cluster %q: outlier_detection success-rate and failure-percentage ejection (%d hosts; set the "+
			"enforcing_* percentages to 0 or keep fewer hosts than the *_minimum_hosts)", name, hosts)
	}
	return nil
}

// protocolOptions reads HttpProtocolOptions: HTTP/2 or not, and the
// upstream HTTP filter chain.
func protocolOptions(c *clusterv3.Cluster) (bool, *filterConfig, error) {
	//lint:ignore SA1019 Envoy still honours the deprecated field
	http2 := c.GetHttp2ProtocolOptions() != nil
	a := c.GetTypedExtensionProtocolOptions()[httpProtocolOptionsKey]
	if len(c.GetTypedExtensionProtocolOptions()) > 1 || len(c.GetTypedExtensionProtocolOptions()) == 1 && a == nil {
		return false, nil, unsupported("cluster %q: typed_extension_protocol_options other than %s", c.GetName(), httpProtocolOptionsKey)
	}
	if a == nil {
		return http2, nil, nil
	}
	o := &upstreamsv3.HttpProtocolOptions{}
	if err := a.UnmarshalTo(o); err != nil {
		return false, nil, fmt.Errorf("standin: cluster %q: %s: %w", c.GetName(), httpProtocolOptionsKey, err)
	}
	if extra := extraFields(o, "explicit_http_config", "http_filters"); len(extra) > 0 {
		return false, nil, unsupported("cluster %q: HttpProtocolOptions %v", c.GetName(), extra)
	}
	ex := o.GetExplicitHttpConfig()
	switch {
	case ex == nil:
		return false, nil, unsupported("cluster %q: HttpProtocolOptions without explicit_http_config", c.GetName())
	case ex.GetHttp3ProtocolOptions() != nil:
		return false, nil, unsupported("cluster %q: HTTP/3", c.GetName())
	}
	http2 = http2 || ex.GetHttp2ProtocolOptions() != nil
	fc, err := upstreamFilters(c.GetName(), o.GetHttpFilters())
	return http2, fc, err
}

// upstreamFilters compiles HttpProtocolOptions.http_filters: ext_proc,
// then the codec, which must be last (upstream_impl.cc, ClusterInfoImpl:
// "The codec filter is the only valid terminal upstream HTTP filter").
// Other upstream filters (header_mutation, buffer, lua, ...) are not
// implemented.
func upstreamFilters(cluster string, fs []*hcmv3.HttpFilter) (*filterConfig, error) {
	if len(fs) == 0 {
		return nil, nil
	}
	isCodec := func(f *hcmv3.HttpFilter) bool {
		return f.GetTypedConfig() != nil && f.GetTypedConfig().MessageIs(&upstreamcodecv3.UpstreamCodec{})
	}
	if !isCodec(fs[len(fs)-1]) {
		return nil, fmt.Errorf("standin: cluster %q: The codec filter is the only valid terminal upstream HTTP filter", cluster)
	}
	var out *filterConfig
	for _, f := range fs[:len(fs)-1] {
		ep := &extprocv3.ExternalProcessor{}
		switch {
		case f.GetDisabled() || f.GetIsOptional() || f.GetConfigDiscovery() != nil:
			return nil, unsupported("cluster %q: upstream filter %q: disabled, optional or discovered filters", cluster, f.GetName())
		case isCodec(f):
			return nil, fmt.Errorf("standin: cluster %q: terminal filter named %q must be the last filter in an upstream http filter chain", cluster, f.GetName())
		case f.GetTypedConfig() == nil || f.GetTypedConfig().UnmarshalTo(ep) != nil:
			return nil, unsupported("cluster %q: upstream HTTP filter %q (ext_proc and upstream_codec are implemented)", cluster, f.GetName())
		case out != nil:
			return nil, unsupported("cluster %q: more than one upstream ext_proc filter", cluster)
		}
		fc, err := compileExtProc(ep, true)
		if err != nil {
			return nil, fmt.Errorf("cluster %q: %w", cluster, err)
		}
		out = fc
	}
	return out, nil
}

// circuitBreakers are what the cluster lets through at once
// (cluster.maxInFlight) and its concurrent retries (max_retries, default
// 3, or a retry_budget: budget_percent of the requests in flight, default
// 20%, at least min_retry_concurrency, default 3), from the DEFAULT
// priority's thresholds; routes never ask for HIGH.
func circuitBreakers(c *clusterv3.Cluster, cl *cluster) error {
	limit := func(v *wrapperspb.UInt32Value, def int64) int64 {
		if v == nil {
			return def
		}
		return int64(v.GetValue())
	}
	var def *clusterv3.CircuitBreakers_Thresholds
	if extra := extraFields(c.GetCircuitBreakers(), "thresholds"); len(extra) > 0 {
		return unsupported("cluster %q: circuit_breakers %v", c.GetName(), extra)
	}
	for _, t := range c.GetCircuitBreakers().GetThresholds() {
		if extra := extraFields(t, "priority", "max_connections", "max_pending_requests", "max_requests", "max_retries",
			"track_remaining", "retry_budget"); len(extra) > 0 {
			return unsupported("cluster %q: circuit breaker thresholds %v", c.GetName(), extra)
		}
		if t.GetPriority() == corev3.RoutingPriority_DEFAULT {
			def = t
		}
	}
	n := limit(def.GetMaxRequests(), 1024)
	if !cl.http2 {
		n = min(n, limit(def.GetMaxConnections(), 1024)+limit(def.GetMaxPendingRequests(), 1024))
	}
	cl.maxInFlight, cl.maxRetries = n, limit(def.GetMaxRetries(), 3)
	if b := def.GetRetryBudget(); b != nil {
		cl.budget, cl.budgetPercent, cl.minRetries = true, 20, limit(b.GetMinRetryConcurrency(), 3)
		if p := b.GetBudgetPercent(); p != nil {
			cl.budgetPercent = p.GetValue()
		}
	}
	return nil
}

// checkHealthChecks accepts the gRPC health check of an HTTP/2 cluster
// with one endpoint and the default panic threshold, and does not run it:
// Envoy's default panic threshold (50%) routes to a cluster's hosts
// whatever their health when fewer than half are healthy, so one unhealthy
// host still gets every request and routing is the same either way. With
// more hosts, or a panic threshold of its own (matters), it is refused.
func checkHealthChecks(c *clusterv3.Cluster, http2, matters bool) error {
	for _, hc := range c.GetHealthChecks() {
		if extra := extraFields(hc, "timeout", "interval", "no_traffic_interval", "unhealthy_threshold", "healthy_threshold",
			"grpc_health_check"); len(extra) > 0 || hc.GetGrpcHealthCheck() == nil {
			return unsupported("cluster %q: health check %v (only grpc_health_check with its intervals and thresholds)", c.GetName(), extra)
		}
		if !http2 {
			return fmt.Errorf("standin: cluster %q: gRPC health checks need HTTP/2", c.GetName())
		}
		if matters {
			return unsupported("cluster %q: health checks with several endpoints or a healthy_panic_threshold (health is not checked)", c.GetName())
		}
	}
	return nil
}

// tlsConfig is the cluster's UpstreamTlsContext: sni, or auto_host_sni
// (each host's hostname, verbatim: a port in it is sent too;
// client_context_impl.cc), and the trusted CA. The certificate is
// verified against match_typed_subject_alt_names when there are any
// (DNS and IP address SANs, exact), else against the SNI as Go does;
// auto_sni_san_validation replaces the matchers with the SNI sent
// (default_validator.cc), which is again what Go does.
func tlsConfig(name string, typed *anypb.Any) (*tls.Config, bool, error) {
	ctx := &tlsv3.UpstreamTlsContext{}
	if typed == nil || typed.UnmarshalTo(ctx) != nil {
		return nil, false, unsupported("cluster %q: only the UpstreamTlsContext transport socket is implemented", name)
	}
	cfg := &tls.Config{ServerName: ctx.GetSni(), MinVersion: tls.VersionTLS12}
	vc := ctx.GetCommonTlsContext().GetValidationContext()
	if vc == nil {
		return nil, false, unsupported("cluster %q: TLS without validation_context (Envoy would not verify the upstream)", name)
	}
	if file := vc.GetTrustedCa().GetFilename(); file != "" {
		pem, err := os.ReadFile(file)
		if err != nil {
			return nil, false, fmt.Errorf("standin: cluster %q: reading trusted CA: %w", name, err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, false, errors.New("standin: cluster " + name + ": no certificates in " + file)
		}
	}
	if sans := vc.GetMatchTypedSubjectAltNames(); len(sans) > 0 && !ctx.GetAutoSniSanValidation() {
		verify, err := sanVerifier(name, sans)
		if err != nil {
			return nil, false, err
		}
		// Go's own check is against ServerName; Envoy's against the
		// matchers: the chain is verified here instead.
		cfg.InsecureSkipVerify, cfg.VerifyConnection = true, func(cs tls.ConnectionState) error {
			return verify(cs, cfg.RootCAs)
		}
	}
	return cfg, ctx.GetAutoHostSni(), nil
}

// sanVerifier verifies a peer's chain against the roots and its leaf
// against the SAN matchers: any one matching passes.
func sanVerifier(cluster string, sans []*tlsv3.SubjectAltNameMatcher) (func(tls.ConnectionState, *x509.CertPool) error, error) {
	type want struct {
		ip  bool
		val string
	}
	var ws []want
	for _, m := range sans {
		exact, ok := m.GetMatcher().GetMatchPattern().(*matcherv3.StringMatcher_Exact)
		if !ok || m.GetMatcher().GetIgnoreCase() {
			return nil, unsupported("cluster %q: SAN matcher %v (exact matches are implemented)", cluster, m.GetMatcher())
		}
		switch m.GetSanType() {
		case tlsv3.SubjectAltNameMatcher_DNS:
			ws = append(ws, want{val: exact.Exact})
		case tlsv3.SubjectAltNameMatcher_IP_ADDRESS:
			ws = append(ws, want{ip: true, val: exact.Exact})
		default:
			return nil, unsupported("cluster %q: SAN type %v (DNS and IP_ADDRESS are implemented)", cluster, m.GetSanType())
		}
	}
	return func(cs tls.ConnectionState, roots *x509.CertPool) error {
		if len(cs.PeerCertificates) == 0 {
			return errors.New("no peer certificate")
		}
		leaf := cs.PeerCertificates[0]
		inter := x509.NewCertPool()
		for _, c := range cs.PeerCertificates[1:] {
			inter.AddCert(c)
		}
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter}); err != nil {
			return err
		}
		for _, w := range ws {
			if w.ip && slices.ContainsFunc(leaf.IPAddresses, func(ip net.IP) bool { return ip.Equal(net.ParseIP(w.val)) }) ||
				!w.ip && slices.Contains(leaf.DNSNames, w.val) {
				return nil
			}
		}
		return fmt.Errorf("certificate SANs %v %v match none of %v", leaf.DNSNames, leaf.IPAddresses, ws)
	}, nil
}
