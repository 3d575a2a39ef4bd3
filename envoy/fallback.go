package envoy

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	codecv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/upstream_codec/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	previoushosts "github.com/envoyproxy/go-control-plane/envoy/extensions/retry/host/previous_hosts/v3"
	previouspriorities "github.com/envoyproxy/go-control-plane/envoy/extensions/retry/priority/previous_priorities/v3"
	upstreamsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"modelgate/envoy/routing"
)

// fallback is a model with fallback (routing.Model.Fallback) as Envoy
// serves it. Envoy picks the deployment for each attempt (priorities,
// weights, outlier ejection) and retries on another when one fails; an
// ext_proc filter in the model cluster's upstream filter chain translates
// each attempt for the provider of the deployment Envoy chose, which it
// reads from the endpoint's metadata. envoy/standin's doc.go has the Envoy
// rules this relies on, this package's doc.go the choice of one cluster
// with priorities over an aggregate cluster.
type fallback struct {
	// index is the model's in Config.Routing.Models, for errors.
	index int
	// model is the public model id, matched on routing.ModelHeader.
	model string
	// deployments are the model's backends, each at most once.
	deployments []routing.Deployment
	// Fallback says when Envoy retries and when it ejects a deployment.
	// Envoy never retries once the answer has started reaching the client.
	routing.Fallback
	// timeouts bound each attempt: the model's, else those of its first
	// deployment's backend.
	timeouts routing.Timeouts
}

// fallbacks are the models with fallback, in the table's order.
func (c Config) fallbacks() []fallback {
	var out []fallback
	for i, m := range c.Routing.Models {
		if m.Fallback == nil {
			continue
		}
		f := fallback{index: i, model: m.ID, deployments: m.Deployments, Fallback: *m.Fallback, timeouts: m.Timeouts}
		if len(m.Deployments) > 0 {
			if b, ok := c.Routing.Backend(m.Deployments[0].Backend); ok {
				f.timeouts = f.timeouts.Or(b.Timeouts)
			}
		}
		out = append(out, f)
	}
	return out
}

// Defaults of routing.Fallback's zero values.
const (
	defaultMaxRetryAfter = 10 * time.Second
	// defaultBudgetPercent lets every request in flight retry. Each retry
	// goes to another deployment (previous_priorities, previous_hosts),
	// so a failing one gets no more load from it, and the requests a
	// storm of 429s meets while the next deployment is healthy all move
	// there: Envoy's 20%, with its minimum of 3, left most of 40
	// concurrent clients with the 429.
	defaultBudgetPercent = 100
	defaultConsecutive   = 3
	defaultOutlierSweep  = 5 * time.Second
	defaultBaseEjection  = 30 * time.Second
	minRetryConcurrency  = 3
	maxEjection          = 300 * time.Second
	// upstreamExtProcFilter is the upstream ext_proc's name, not the
	// router-level filter's: ext_proc keeps its logging info in the
	// request's filter state under the filter's configured name
	// (ext_proc.cc, filterConfigName), and upstream filters share the
	// request's stream info, so two filters of one name would write one
	// record. The extension is found by the type of its typed_config.
	upstreamExtProcFilter = "modelgate.upstream_ext_proc"
	upstreamCodecFilter   = "envoy.filters.http.upstream_codec"
)

// BackendMetadataKey is the key of filter_metadata[MetadataNamespace] on
// a model cluster's endpoints that names the deployment's backend.
const BackendMetadataKey = "backend"

// UpstreamAttributes are what the upstream ext_proc filter asks of each
// attempt: the chosen endpoint's backend, as a path into its metadata in
// namespace (the metadata message itself would arrive as a debug string,
// which is not for parsing), and the attempt's number.
func UpstreamAttributes(namespace string) []string {
	return []string{
		"xds.upstream_host_metadata.filter_metadata['" + namespace + "']['" + BackendMetadataKey + "']",
		"upstream.request_attempt_count",
	}
}

// ModelCluster is the cluster name of a model with fallback.
func ModelCluster(model string) string {
	return "model_" + strings.Trim(unsafeClusterChars.ReplaceAllString(strings.ToLower(model), "_"), "_")
}

var unsafeClusterChars = regexp.MustCompile(`[^a-z0-9._-]+`)

func (f fallback) withDefaults() fallback {
	if f.Retries == 0 && len(f.deployments) > 1 {
		f.Retries = len(f.deployments) - 1
	}
	if len(f.RetryOn) == 0 {
		f.RetryOn = []routing.RetryCondition{routing.RetryConnect, routing.RetryReset, routing.Retry5xx, routing.Retry429}
	}
	if f.MaxRetryAfter == 0 {
		f.MaxRetryAfter = defaultMaxRetryAfter
	}
	if f.BudgetPercent == 0 {
		f.BudgetPercent = defaultBudgetPercent
	}
	if f.Outlier.Consecutive == 0 {
		f.Outlier.Consecutive = defaultConsecutive
	}
	if f.Outlier.Interval == 0 {
		f.Outlier.Interval = defaultOutlierSweep
	}
	if f.Outlier.BaseEjection == 0 {
		f.Outlier.BaseEjection = defaultBaseEjection
	}
	f.deployments = slices.Clone(f.deployments)
	for i := range f.deployments {
		if f.deployments[i].Weight == 0 {
			f.deployments[i].Weight = 1
		}
	}
	return f
}

// checkModels reports every problem of the models: a deployment on a
// backend that is not in the table or failed its own checks; and of a
// model with fallback, an id that cannot be a header value, no deployments
// or one backend twice, a cluster name another model's takes, a number
// that does not fit Envoy's uint32, a negative duration, an unknown retry
// condition.
func (c Config) checkModels(ups []upstream) []error {
	var errs []error
	backends := map[string]bool{}
	for _, up := range ups {
		backends[up.name] = true
	}
	for i, m := range c.Routing.Models {
		for j, d := range m.Deployments {
			if !backends[d.Backend] {
				errs = append(errs, fmt.Errorf("models[%d] %q: deployments[%d]: unknown backend %q", i, m.ID, j, d.Backend))
			}
		}
	}
	clusters := map[string]string{}
	for _, f := range c.fallbacks() {
		at := fmt.Sprintf("models[%d] %q", f.index, f.model)
		if !headerValue(f.model) {
			errs = append(errs, fmt.Errorf("%s: the id must be non-empty without control characters (it is a header value)", at))
		}
		name := ModelCluster(f.model)
		if other, dup := clusters[name]; dup {
			errs = append(errs, fmt.Errorf("%s: cluster %s is also model %q's", at, name, other))
		}
		clusters[name] = f.model
		if len(f.deployments) == 0 {
			errs = append(errs, fmt.Errorf("%s: fallback with no deployments", at))
		}
		seen := map[string]bool{}
		for j, d := range f.deployments {
			dat := fmt.Sprintf("%s: deployments[%d] (backend %q)", at, j, d.Backend)
			if seen[d.Backend] {
				errs = append(errs, fmt.Errorf("%s: deployments[%d]: backend %q twice", at, j, d.Backend))
			}
			seen[d.Backend] = true
			errs = appendRange(errs, dat, "priority", d.Priority)
			errs = appendRange(errs, dat, "weight", d.Weight)
		}
		errs = appendRange(errs, at, "fallback retries", f.Retries)
		errs = appendRange(errs, at, "fallback outlier consecutive", f.Outlier.Consecutive)
		for _, rc := range f.RetryOn {
			switch rc {
			case routing.RetryConnect, routing.RetryReset, routing.Retry5xx, routing.Retry429:
			default:
				errs = append(errs, fmt.Errorf("%s: unknown retry condition %q", at, rc))
			}
		}
		if f.BudgetPercent < 0 || f.BudgetPercent > 100 {
			errs = append(errs, fmt.Errorf("%s: retry budget %v%% is not 0 to 100", at, f.BudgetPercent))
		}
		for _, d := range []struct {
			what string
			d    time.Duration
		}{{"max retry after", f.MaxRetryAfter}, {"outlier interval", f.Outlier.Interval}, {"outlier base ejection", f.Outlier.BaseEjection}} {
			if d.d < 0 {
				errs = append(errs, fmt.Errorf("%s: fallback %s %v is negative", at, d.what, d.d))
			}
		}
		if err := checkTimeouts(f.timeouts); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", at, err))
		}
	}
	return errs
}

// appendRange appends an error unless n fits the uint32 Envoy takes it as.
func appendRange(errs []error, at, what string, n int) []error {
	if n < 0 || uint64(n) > math.MaxUint32 {
		return append(errs, fmt.Errorf("%s: %s %d is not 0 to %d", at, what, n, uint32(math.MaxUint32)))
	}
	return errs
}

// modelClusters makes one cluster per model with fallback: an endpoint per
// deployment, at its priority and weight, named by its backend in the
// endpoint metadata and with its authority as hostname (auto_host_rewrite
// sends it as Host); least-request balancing, outlier ejection without
// panic (with every deployment ejected the client gets 503 rather than a
// deployment known to fail), a retry budget, and the upstream ext_proc
// filter that translates each attempt.
func modelClusters(cfg Config, ups []upstream) ([]*clusterv3.Cluster, error) {
	byName := map[string]upstream{}
	for _, up := range ups {
		byName[up.name] = up
	}
	var out []*clusterv3.Cluster
	for _, f := range cfg.fallbacks() {
		f = f.withDefaults()
		name := ModelCluster(f.model)
		la := &endpointv3.ClusterLoadAssignment{ClusterName: name}
		allIP := true
		var tlsMatches []*clusterv3.Cluster_TransportSocketMatch
		for _, d := range f.deployments {
			up := byName[d.Backend]
			allIP = allIP && up.isIP()
			md, err := structpb.NewStruct(map[string]any{BackendMetadataKey: d.Backend})
			if err != nil {
				return nil, err
			}
			filterMD := map[string]*structpb.Struct{cfg.MetadataNamespace: md}
			if up.tls {
				filterMD[transportSocketMatchKey] = tlsMatch(d.Backend)
				tlsMatches = append(tlsMatches, &clusterv3.Cluster_TransportSocketMatch{
					Name:            "tls-" + d.Backend,
					Match:           tlsMatch(d.Backend),
					TransportSocket: tlsSocket(up, cfg.CAFile),
				})
			}
			// The weight is the endpoint's: Envoy ignores a locality's
			// without locality-weighted balancing.
			la.Endpoints = append(la.Endpoints, &endpointv3.LocalityLbEndpoints{
				Priority: uint32(d.Priority),
				LbEndpoints: []*endpointv3.LbEndpoint{{
					LoadBalancingWeight: wrapperspb.UInt32(uint32(d.Weight)),
					HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{
						Address: socketAddress(up.host, up.port), Hostname: up.authority(),
					}},
					Metadata: &corev3.Metadata{FilterMetadata: filterMD},
				}},
			})
		}
		cb := circuitBreakers(cfg)
		cb.Thresholds[0].RetryBudget = &clusterv3.CircuitBreakers_Thresholds_RetryBudget{
			BudgetPercent:       &typev3.Percent{Value: f.BudgetPercent},
			MinRetryConcurrency: wrapperspb.UInt32(minRetryConcurrency),
		}
		c := &clusterv3.Cluster{
			Name:                          name,
			ConnectTimeout:                durationpb.New(backendConnectTimeout),
			PerConnectionBufferLimitBytes: wrapperspb.UInt32(cfg.BufferLimitBytes),
			LbPolicy:                      clusterv3.Cluster_LEAST_REQUEST,
			LoadAssignment:                la,
			CircuitBreakers:               cb,
			CommonLbConfig:                &clusterv3.Cluster_CommonLbConfig{HealthyPanicThreshold: &typev3.Percent{Value: 0}},
			OutlierDetection: &clusterv3.OutlierDetection{
				Consecutive_5Xx:                    wrapperspb.UInt32(uint32(f.Outlier.Consecutive)),
				ConsecutiveGatewayFailure:          wrapperspb.UInt32(uint32(f.Outlier.Consecutive)),
				EnforcingConsecutiveGatewayFailure: wrapperspb.UInt32(100),
				Interval:                           durationpb.New(f.Outlier.Interval),
				BaseEjectionTime:                   durationpb.New(f.Outlier.BaseEjection),
				MaxEjectionTime:                    durationpb.New(max(maxEjection, f.Outlier.BaseEjection)),
				MaxEjectionPercent:                 wrapperspb.UInt32(100),
				// Success-rate ejection is on by default from five hosts;
				// consecutive failures are the rule here.
				EnforcingSuccessRate: wrapperspb.UInt32(0),
			},
			TypedExtensionProtocolOptions: map[string]*anypb.Any{httpProtocolOptionsKey: mustAny(upstreamProtocolOptions(cfg))},
		}
		// STRICT_DNS resolves every endpoint's host, IP literals included;
		// STATIC takes only literals. LOGICAL_DNS, as the backends'
		// own clusters have, cannot be: it takes exactly one endpoint.
		// So a deployment is one host per address its name resolves to,
		// and outlier detection counts and ejects each address on its
		// own: a provider behind several addresses is set aside one
		// address at a time, each after Consecutive failures of its own.
		setDiscovery(c, allIP, clusterv3.Cluster_STRICT_DNS)
		c.TransportSocketMatches = tlsMatches
		out = append(out, c)
	}
	return out, nil
}

// transportSocketMatchKey is the endpoint metadata namespace Envoy matches
// transport_socket_matches against.
const transportSocketMatchKey = "envoy.transport_socket_match"

// tlsMatch labels a deployment's endpoint with its backend, and picks
// that backend's TLS settings in transport_socket_matches: each https
// deployment is verified as its backend's own cluster is, with the bare
// host name as SNI and SAN. Not auto_host_sni: it takes the endpoint's
// hostname verbatim, which carries the port when it is not 443 (the
// hostname is also what auto_host_rewrite sends as Host, where the port
// belongs), so SNI and the verified name would be "host:8443" and every
// handshake would fail.
func tlsMatch(backend string) *structpb.Struct {
	return &structpb.Struct{Fields: map[string]*structpb.Value{BackendMetadataKey: structpb.NewStringValue(backend)}}
}

// upstreamProtocolOptions carry the model cluster's upstream filters:
// ext_proc, which translates each attempt for the provider of the
// endpoint Envoy chose, then the codec. The request body is sent again on
// every attempt (BUFFERED), so no state is kept between the two ext_proc
// streams of a request; the response is translated by the router-level
// filter, which learns the answering deployment from the header the
// upstream filter adds.
func upstreamProtocolOptions(cfg Config) *upstreamsv3.HttpProtocolOptions {
	ep := &extprocv3.ExternalProcessor{
		GrpcService: &corev3.GrpcService{TargetSpecifier: &corev3.GrpcService_EnvoyGrpc_{
			EnvoyGrpc: &corev3.GrpcService_EnvoyGrpc{ClusterName: ExtProcCluster},
		}},
		ProcessingMode: &extprocv3.ProcessingMode{
			RequestHeaderMode:   extprocv3.ProcessingMode_SEND,
			RequestBodyMode:     extprocv3.ProcessingMode_BUFFERED,
			RequestTrailerMode:  extprocv3.ProcessingMode_SKIP,
			ResponseHeaderMode:  extprocv3.ProcessingMode_SEND,
			ResponseBodyMode:    extprocv3.ProcessingMode_NONE,
			ResponseTrailerMode: extprocv3.ProcessingMode_SKIP,
		},
		MessageTimeout:    durationpb.New(cfg.MessageTimeout),
		RequestAttributes: UpstreamAttributes(cfg.MetadataNamespace),
		// The router-level stream writes what a retry needs to know of
		// the client's request (its path and content type: Envoy shares
		// one header map across attempts, and the first attempt rewrote
		// both) as dynamic metadata; each attempt's stream reads it.
		// It also receives the namespace: an attempt's own error reply
		// carries the server's GatewayReplyKey, which keeps
		// local_reply_config from rewriting it.
		MetadataOptions: &extprocv3.MetadataOptions{
			ForwardingNamespaces: &extprocv3.MetadataOptions_MetadataNamespaces{Untyped: []string{cfg.MetadataNamespace}},
			ReceivingNamespaces:  &extprocv3.MetadataOptions_MetadataNamespaces{Untyped: []string{cfg.MetadataNamespace}},
		},
	}
	return &upstreamsv3.HttpProtocolOptions{
		UpstreamProtocolOptions: &upstreamsv3.HttpProtocolOptions_ExplicitHttpConfig_{
			ExplicitHttpConfig: &upstreamsv3.HttpProtocolOptions_ExplicitHttpConfig{
				ProtocolConfig: &upstreamsv3.HttpProtocolOptions_ExplicitHttpConfig_HttpProtocolOptions{
					HttpProtocolOptions: &corev3.Http1ProtocolOptions{},
				},
			},
		},
		HttpFilters: []*hcmv3.HttpFilter{
			{Name: upstreamExtProcFilter, ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAny(ep)}},
			{Name: upstreamCodecFilter, ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAny(&codecv3.UpstreamCodec{})}},
		},
	}
}

// fallbackRoutes route each model with fallback to its cluster, before the
// backends' routes: one for streaming requests (with the idle timeout)
// and one for the rest.
func fallbackRoutes(cfg Config) []*routev3.Route {
	var rs []*routev3.Route
	for _, f := range cfg.fallbacks() {
		f = f.withDefaults()
		if f.timeouts.StreamIdle > 0 {
			r := fallbackRoute(cfg, f, f.timeouts, exactHeader(routing.StreamHeader, "1"))
			r.Name = ModelCluster(f.model) + "/stream"
			rs = append(rs, r)
		}
		t := f.timeouts
		t.StreamIdle = 0
		rs = append(rs, fallbackRoute(cfg, f, t))
	}
	return rs
}

func fallbackRoute(cfg Config, f fallback, t routing.Timeouts, extra ...*routev3.HeaderMatcher) *routev3.Route {
	rp := &routev3.RetryPolicy{
		RetryOn:                       retryOn(f.RetryOn),
		NumRetries:                    wrapperspb.UInt32(uint32(f.Retries)),
		HostSelectionRetryMaxAttempts: 3,
		RetryPriority: &routev3.RetryPolicy_RetryPriority{Name: "envoy.retry_priorities.previous_priorities",
			ConfigType: &routev3.RetryPolicy_RetryPriority_TypedConfig{TypedConfig: mustAny(
				&previouspriorities.PreviousPrioritiesConfig{UpdateFrequency: 1})}},
		RetryHostPredicate: []*routev3.RetryPolicy_RetryHostPredicate{{Name: "envoy.retry_host_predicates.previous_hosts",
			ConfigType: &routev3.RetryPolicy_RetryHostPredicate_TypedConfig{TypedConfig: mustAny(&previoushosts.PreviousHostsPredicate{})}}},
	}
	for _, c := range f.RetryOn {
		if c == routing.Retry429 {
			rp.RetriableStatusCodes = []uint32{429}
			rp.RateLimitedRetryBackOff = &routev3.RetryPolicy_RateLimitedRetryBackOff{
				ResetHeaders: []*routev3.RetryPolicy_ResetHeader{{Name: "retry-after", Format: routev3.RetryPolicy_SECONDS}},
				MaxInterval:  durationpb.New(f.MaxRetryAfter),
			}
		}
	}
	if t.ResponseHeaders > 0 {
		rp.PerTryTimeout = durationpb.New(t.ResponseHeaders)
	}
	if t.StreamIdle > 0 {
		rp.PerTryIdleTimeout = durationpb.New(t.StreamIdle)
	}
	return &routev3.Route{
		Name: ModelCluster(f.model),
		Match: &routev3.RouteMatch{
			PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"},
			Headers:       append([]*routev3.HeaderMatcher{exactHeader(routing.ModelHeader, f.model)}, extra...),
		},
		Action: &routev3.Route_Route{Route: &routev3.RouteAction{
			ClusterSpecifier:     &routev3.RouteAction_Cluster{Cluster: ModelCluster(f.model)},
			Timeout:              durationpb.New(0),
			HostRewriteSpecifier: &routev3.RouteAction_AutoHostRewrite{AutoHostRewrite: wrapperspb.Bool(true)},
			RetryPolicy:          rp,
		}},
		RequestHeadersToRemove: []string{cfg.RoutingHeader, routing.ModelHeader, routing.StreamHeader},
	}
}

// retryOn maps the conditions onto Envoy's retry_on tokens: 429 is a
// retriable status code.
func retryOn(on []routing.RetryCondition) string {
	var tokens []string
	for _, c := range on {
		if c == routing.Retry429 {
			tokens = append(tokens, "retriable-status-codes")
		} else {
			tokens = append(tokens, string(c))
		}
	}
	return strings.Join(tokens, ",")
}
