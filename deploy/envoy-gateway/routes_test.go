package envoygateway_test

// The routes: every route of the bootstrap has exactly one HTTPRoute rule
// with the same header matches, and Envoy Gateway would build the same
// route and cluster from that rule, its Backend, BackendTLSPolicy and
// BackendTrafficPolicy.

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"sort"
	"strconv"
	"strings"

	egv1a1 "github.com/envoyproxy/gateway/api/v1alpha1"
	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"modelgate/cmd/modelgate/wiring"
	"modelgate/deploy"
	"modelgate/deploy/deploytest"
	"modelgate/envoy"
	"modelgate/extproc/config"
)

// ruleRef is one rule of an HTTPRoute attached to the Gateway.
type ruleRef struct {
	route *gwapiv1.HTTPRoute
	index int
	rule  *gwapiv1.HTTPRouteRule
	// key lists the rule's exact header matches, "name=value" sorted;
	// ok is false when the rule matches otherwise (regex, several matches,
	// another path than PathPrefix /).
	key     string
	ok      bool
	headers map[string]string
}

func (r *ruleRef) String() string {
	return fmt.Sprintf("HTTPRoute %s rules[%d]", r.route.Name, r.index)
}

func newRuleRef(route *gwapiv1.HTTPRoute, i int) *ruleRef {
	r := &ruleRef{route: route, index: i, rule: &route.Spec.Rules[i], headers: map[string]string{}, ok: true}
	ms := r.rule.Matches
	if len(ms) > 1 {
		r.ok = false
		return r
	}
	if len(ms) == 1 {
		m := ms[0]
		if p := m.Path; p != nil && (p.Type == nil || *p.Type != gwapiv1.PathMatchPathPrefix || p.Value == nil || *p.Value != "/") {
			r.ok = false
		}
		if len(m.QueryParams) > 0 || m.Method != nil {
			r.ok = false
		}
		for _, h := range m.Headers {
			if h.Type != nil && *h.Type != gwapiv1.HeaderMatchExact {
				r.ok = false
			}
			r.headers[strings.ToLower(string(h.Name))] = h.Value
		}
	}
	r.key = deploytest.HeaderKey(r.headers)
	return r
}

// bootstrapKey is a bootstrap route's key as ruleRef's; ok is false when
// the route matches on more than prefix / and exact headers.
func bootstrapKey(r *routev3.Route) (string, bool) {
	h := map[string]string{}
	ok := r.GetMatch().GetPrefix() == "/"
	for _, m := range r.GetMatch().GetHeaders() {
		exact := m.GetStringMatch().GetExact()
		ok = ok && exact != ""
		h[m.GetName()] = exact
	}
	return deploytest.HeaderKey(h), ok
}

// attachedRules lists the rules of the HTTPRoutes on the Gateway.
func attachedRules(objs []deploy.Object, g *gwapiv1.Gateway) ([]*ruleRef, []error) {
	var rules []*ruleRef
	var errs []error
	for _, hr := range deploy.Find[*gwapiv1.HTTPRoute](objs) {
		on := false
		for _, p := range hr.Spec.ParentRefs {
			ns := hr.Namespace
			if p.Namespace != nil {
				ns = string(*p.Namespace)
			}
			on = on || string(p.Name) == g.Name && ns == g.Namespace && (p.Kind == nil || *p.Kind == "Gateway")
		}
		if !on {
			errs = append(errs, fmt.Errorf("HTTPRoute %s: not attached to Gateway %s", hr.Name, g.Name))
			continue
		}
		for i := range hr.Spec.Rules {
			rules = append(rules, newRuleRef(hr, i))
		}
	}
	return rules, errs
}

func checkRoutes(objs []deploy.Object, gw *deploytest.Gateway, g *gwapiv1.Gateway) []error {
	rules, errs := attachedRules(objs, g)
	cfg, err := withExtraBackends(objs, gw, rules)
	if err != nil {
		return append(errs, err)
	}
	boot, err := envoy.Bootstrap(wiring.EnvoyConfig(cfg))
	if err != nil {
		return append(errs, err)
	}
	routes, notFound := deploytest.BackendRoutes(boot)
	used := map[*ruleRef]bool{}
	for _, br := range routes {
		key, ok := bootstrapKey(br)
		if !ok {
			errs = append(errs, fmt.Errorf("bootstrap route %q matches on more than exact headers: extend this test", br.GetName()))
			continue
		}
		var matched []*ruleRef
		for _, r := range rules {
			if r.ok && r.key == key {
				matched = append(matched, r)
			}
		}
		if len(matched) != 1 {
			errs = append(errs, fmt.Errorf("%d rules match route %q of the bootstrap (headers %s); want one", len(matched), br.GetName(), key))
			if len(matched) == 0 {
				errs[len(errs)-1] = fmt.Errorf("no rule matches route %q of the bootstrap (headers %s)", br.GetName(), key)
			}
			continue
		}
		used[matched[0]] = true
		errs = append(errs, checkRule(objs, boot, br, matched[0])...)
	}
	var catchAll []*ruleRef
	for _, r := range rules {
		switch {
		case r.ok && r.key == "":
			catchAll = append(catchAll, r)
		case !used[r]:
			errs = append(errs, fmt.Errorf("%s (headers %s) matches no route of the bootstrap: want the routing header %s set to a backend name",
				r, r.key, gw.RoutingHeader))
		}
	}
	if len(catchAll) != 1 {
		return append(errs, fmt.Errorf("want one catch-all rule (no header match) to enable ext_proc, got %d", len(catchAll)))
	}
	return append(errs, checkCatchAll(objs, catchAll[0], notFound)...)
}

// withExtraBackends adds to the cluster config a backend for each routing
// header value of a rule that names none of its backends (a provider shown
// as an example, such as anthropic): its URL from the rule's Backend and
// BackendTLSPolicy, the config's default timeouts. Their rules are then
// checked like the others, for consistency.
func withExtraBackends(objs []deploy.Object, gw *deploytest.Gateway, rules []*ruleRef) (*config.Config, error) {
	extra := map[string]deploytest.Upstream{}
	for _, r := range rules {
		name, ok := r.headers[gw.RoutingHeader]
		if !ok {
			continue
		}
		u, _, err := ruleUpstream(objs, r)
		if err != nil {
			return nil, err
		}
		extra[name] = u
	}
	return gw.WithBackends(extra)
}

// ruleUpstream resolves a rule's one backendRef to the Backend's endpoint,
// with the TLS its BackendTLSPolicy sets.
func ruleUpstream(objs []deploy.Object, r *ruleRef) (deploytest.Upstream, *egv1a1.Backend, error) {
	var u deploytest.Upstream
	refs := r.rule.BackendRefs
	if len(refs) != 1 {
		return u, nil, fmt.Errorf("%s: want one backendRef, got %d", r, len(refs))
	}
	ref := refs[0]
	if ref.Group == nil || *ref.Group != egv1a1.GroupName || ref.Kind == nil || *ref.Kind != egv1a1.KindBackend {
		return u, nil, fmt.Errorf("%s: backendRefs[0] must be an Envoy Gateway Backend", r)
	}
	var be *egv1a1.Backend
	for _, b := range deploy.Find[*egv1a1.Backend](objs) {
		if b.Name == string(ref.Name) && b.Namespace == r.route.Namespace {
			be = b
		}
	}
	if be == nil {
		return u, nil, fmt.Errorf("%s: no Backend %s in namespace %s", r, ref.Name, r.route.Namespace)
	}
	if len(be.Spec.Endpoints) != 1 || be.Spec.Endpoints[0].FQDN == nil {
		return u, be, fmt.Errorf("Backend %s: want one fqdn endpoint, as the bootstrap's cluster", be.Name)
	}
	u.Host, u.Port = be.Spec.Endpoints[0].FQDN.Hostname, uint32(be.Spec.Endpoints[0].FQDN.Port)
	var tls []*gwapiv1.BackendTLSPolicy
	for _, p := range deploy.Find[*gwapiv1.BackendTLSPolicy](objs) {
		for _, t := range p.Spec.TargetRefs {
			if p.Namespace == be.Namespace && t.Group == egv1a1.GroupName && t.Kind == egv1a1.KindBackend && string(t.Name) == be.Name {
				tls = append(tls, p)
			}
		}
	}
	switch {
	case be.Spec.TLS != nil:
		return u, be, fmt.Errorf("Backend %s: set TLS in a BackendTLSPolicy, which also verifies the hostname", be.Name)
	case len(tls) > 1:
		return u, be, fmt.Errorf("Backend %s: %d BackendTLSPolicies", be.Name, len(tls))
	case len(tls) == 1:
		v := tls[0].Spec.Validation
		if v.WellKnownCACertificates == nil || *v.WellKnownCACertificates != gwapiv1.WellKnownCACertificatesSystem || len(v.CACertificateRefs) > 0 {
			return u, be, fmt.Errorf("BackendTLSPolicy %s: verify against the system CAs, as the bootstrap does", tls[0].Name)
		}
		u.SNI, u.SAN = string(v.Hostname), string(v.Hostname)
	}
	return u, be, nil
}

// checkRule compares a rule with the bootstrap route it stands for.
func checkRule(objs []deploy.Object, boot *bootstrapv3.Bootstrap, br *routev3.Route, r *ruleRef) []error {
	at := fmt.Sprintf("%s (route %q)", r, br.GetName())
	ra := br.GetRoute()
	var errs []error
	rewrite, removes := "", []string(nil)
	for _, f := range r.rule.Filters {
		switch {
		case f.Type == gwapiv1.HTTPRouteFilterURLRewrite && f.URLRewrite != nil && f.URLRewrite.Path == nil && f.URLRewrite.Hostname != nil:
			rewrite = string(*f.URLRewrite.Hostname)
		case f.Type == gwapiv1.HTTPRouteFilterRequestHeaderModifier && f.RequestHeaderModifier != nil &&
			len(f.RequestHeaderModifier.Set)+len(f.RequestHeaderModifier.Add) == 0:
			removes = append(removes, f.RequestHeaderModifier.Remove...)
		default:
			errs = append(errs, fmt.Errorf("%s: filter %s: the bootstrap route only rewrites the host and removes headers", at, f.Type))
		}
	}
	if want := ra.GetHostRewriteLiteral(); rewrite != want {
		errs = append(errs, fmt.Errorf("%s: URLRewrite hostname %q, want the bootstrap's host_rewrite_literal %q", at, rewrite, want))
	}
	if want := sortedCopy(br.GetRequestHeadersToRemove()); !slices.Equal(sortedCopy(removes), want) {
		errs = append(errs, fmt.Errorf("%s: RequestHeaderModifier removes %q, want %q (the gateway's headers stop at Envoy)", at, removes, want))
	}
	var request, backendRequest *gwapiv1.Duration
	if t := r.rule.Timeouts; t != nil {
		request, backendRequest = t.Request, t.BackendRequest
	}
	if err := sameDuration(at+" timeouts.request", "the bootstrap route's timeout; Envoy Gateway's default is 15s", request, ra.GetTimeout()); err != nil {
		errs = append(errs, err)
	}
	if backendRequest != nil || r.rule.Retry != nil {
		errs = append(errs, fmt.Errorf("%s: timeouts.backendRequest and retry set the route's timeout or retries; use the BackendTrafficPolicy", at))
	}
	c := deploytest.ClusterOf(boot, ra.GetCluster())
	want, err := deploytest.UpstreamOf(c)
	if err != nil {
		return append(errs, err)
	}
	got, be, err := ruleUpstream(objs, r)
	if err != nil {
		return append(errs, err)
	}
	if got.Host != want.Host || got.Port != want.Port {
		errs = append(errs, fmt.Errorf("%s: Backend %s sends to %s, the bootstrap's cluster %s to %s",
			at, be.Name, net.JoinHostPort(got.Host, strconv.Itoa(int(got.Port))), c.GetName(), net.JoinHostPort(want.Host, strconv.Itoa(int(want.Port)))))
	}
	if got.SNI != want.SNI || got.SAN != want.SAN {
		errs = append(errs, fmt.Errorf("%s: Backend %s: TLS SNI %q and verified name %q (BackendTLSPolicy), want %q and %q as the bootstrap's cluster",
			at, be.Name, got.SNI, got.SAN, want.SNI, want.SAN))
	}
	return append(errs, checkTraffic(objs, at, r, ra, c)...)
}

// checkTraffic compares the one BackendTrafficPolicy of a rule with the
// bootstrap route's retry policy and its cluster.
func checkTraffic(objs []deploy.Object, at string, r *ruleRef, ra *routev3.RouteAction, c *clusterv3.Cluster) []error {
	section := ""
	if r.rule.Name != nil {
		section = string(*r.rule.Name)
	}
	var ps []*egv1a1.BackendTrafficPolicy
	for _, p := range deploy.Find[*egv1a1.BackendTrafficPolicy](objs) {
		if targets(p.Spec.PolicyTargetReferences, r.route.Namespace, p.Namespace, "HTTPRoute", r.route.Name, section) {
			ps = append(ps, p)
		}
	}
	if len(ps) != 1 {
		return []error{fmt.Errorf("%s: want one BackendTrafficPolicy, got %d", at, len(ps))}
	}
	p := ps[0]
	at += " BackendTrafficPolicy " + p.Name
	var errs []error
	rp := ra.GetRetryPolicy()
	retry := p.Spec.Retry
	if rp == nil && retry != nil || rp != nil && retry == nil {
		errs = append(errs, fmt.Errorf("%s: retry %v, the bootstrap's retry_policy %v", at, retry != nil, rp != nil))
	}
	if rp != nil && retry != nil {
		if retry.NumRetries == nil || uint32(*retry.NumRetries) != rp.GetNumRetries().GetValue() {
			errs = append(errs, fmt.Errorf("%s: retry.numRetries %v, want %d (Envoy Gateway's default is 2)", at, deref(retry.NumRetries), rp.GetNumRetries().GetValue()))
		}
		var perTry *gwapiv1.Duration
		if retry.PerRetry != nil {
			perTry = retry.PerRetry.Timeout
		}
		if err := sameDuration(at+" retry.perRetry.timeout", "per_try_timeout", perTry, rp.GetPerTryTimeout()); err != nil {
			errs = append(errs, err)
		}
	}
	var ht *egv1a1.HTTPTimeout
	var connect *gwapiv1.Duration
	if t := p.Spec.Timeout; t != nil {
		ht = t.HTTP
		if t.TCP != nil {
			connect = t.TCP.ConnectTimeout
		}
	}
	if ht == nil {
		ht = &egv1a1.HTTPTimeout{}
	}
	// Envoy Gateway makes it the route's idle_timeout, which bounds the
	// same gaps on routes for streaming requests only.
	if err := sameDuration(at+" timeout.http.streamIdleTimeout", "the bootstrap's per_try_idle_timeout", ht.StreamIdleTimeout, rp.GetPerTryIdleTimeout()); err != nil {
		errs = append(errs, err)
	}
	if ht.RequestTimeout != nil {
		errs = append(errs, fmt.Errorf("%s: timeout.http.requestTimeout would cut long generations; the bootstrap has none", at))
	}
	if err := sameDuration(at+" timeout.tcp.connectTimeout", "the cluster's connect_timeout", connect, c.GetConnectTimeout()); err != nil {
		errs = append(errs, err)
	}
	return append(errs, checkClusterSettings(at, &p.Spec.ClusterSettings, c.GetPerConnectionBufferLimitBytes().GetValue(), c.GetCircuitBreakers())...)
}

// checkClusterSettings: at least the bootstrap cluster's buffer and
// circuit-breaker thresholds.
func checkClusterSettings(at string, s *egv1a1.ClusterSettings, buffer uint32, cbs *clusterv3.CircuitBreakers) []error {
	var errs []error
	if c := s.Connection; buffer > 0 && (c == nil || c.BufferLimit == nil || c.BufferLimit.Value() < int64(buffer)) {
		errs = append(errs, fmt.Errorf("%s: connection.bufferLimit must be at least the bootstrap cluster's %d bytes (Envoy Gateway's default is 32 KiB)", at, buffer))
	}
	for _, th := range cbs.GetThresholds() {
		cb := s.CircuitBreaker
		if cb == nil {
			cb = &egv1a1.CircuitBreaker{}
		}
		for _, v := range []struct {
			field string
			got   *int64
			want  uint32
		}{
			{"maxConnections", cb.MaxConnections, th.GetMaxConnections().GetValue()},
			{"maxPendingRequests", cb.MaxPendingRequests, th.GetMaxPendingRequests().GetValue()},
			{"maxParallelRequests", cb.MaxParallelRequests, th.GetMaxRequests().GetValue()},
		} {
			if v.want > 0 && (v.got == nil || *v.got < int64(v.want)) {
				errs = append(errs, fmt.Errorf("%s: circuitBreaker.%s %v, want at least the bootstrap's %d (Envoy's default is 1024)", at, v.field, deref(v.got), v.want))
			}
		}
	}
	return errs
}

// checkCatchAll: the rule every request matches first answers as the
// bootstrap's catch-all.
func checkCatchAll(objs []deploy.Object, r *ruleRef, nf *routev3.Route) []error {
	at := r.String() + " (catch-all)"
	if nf == nil {
		return []error{errors.New("the bootstrap has no catch-all route")}
	}
	fs := r.rule.Filters
	if len(r.rule.BackendRefs) > 0 || len(fs) != 1 || fs[0].Type != gwapiv1.HTTPRouteFilterExtensionRef || fs[0].ExtensionRef == nil ||
		fs[0].ExtensionRef.Group != egv1a1.GroupName || fs[0].ExtensionRef.Kind != egv1a1.KindHTTPRouteFilter {
		return []error{fmt.Errorf("%s: want only an ExtensionRef to an HTTPRouteFilter with the bootstrap's direct response", at)}
	}
	var f *egv1a1.HTTPRouteFilter
	for _, o := range deploy.Find[*egv1a1.HTTPRouteFilter](objs) {
		if o.Name == string(fs[0].ExtensionRef.Name) && o.Namespace == r.route.Namespace {
			f = o
		}
	}
	if f == nil || f.Spec.DirectResponse == nil {
		return []error{fmt.Errorf("%s: no HTTPRouteFilter %s with a directResponse", at, fs[0].ExtensionRef.Name)}
	}
	dr := f.Spec.DirectResponse
	want := nf.GetDirectResponse()
	contentType := ""
	for _, h := range nf.GetResponseHeadersToAdd() {
		if strings.EqualFold(h.GetHeader().GetKey(), "content-type") {
			contentType = h.GetHeader().GetValue()
		}
	}
	got := struct {
		status      int
		body, ctype string
	}{deref0(dr.StatusCode), "", deref0(dr.ContentType)}
	if dr.Body != nil && (dr.Body.Type == nil || *dr.Body.Type == egv1a1.ResponseValueTypeInline) {
		got.body = deref0(dr.Body.Inline)
	}
	if got.status != int(want.GetStatus()) || got.body != want.GetBody().GetInlineString() || got.ctype != contentType {
		return []error{fmt.Errorf("%s: HTTPRouteFilter %s answers %d %q %s, the bootstrap's catch-all %d %q %s",
			at, f.Name, got.status, got.ctype, got.body, want.GetStatus(), contentType, want.GetBody().GetInlineString())}
	}
	return nil
}

func deref0[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

func sortedCopy(s []string) []string {
	s = slices.Clone(s)
	sort.Strings(s)
	return s
}
