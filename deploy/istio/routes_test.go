package istio_test

// The VirtualServices: their routes, tried in order, stand for the
// bootstrap's routes one for one, lead to a ServiceEntry and
// DestinationRule that reach the provider as the bootstrap's cluster does,
// and end with the bootstrap's catch-all. The idle timeouts VirtualService
// cannot express come from the EnvoyFilters' HTTP_ROUTE patches on them.

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"sort"
	"strconv"
	"strings"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	istioapi "istio.io/api/networking/v1alpha3"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"

	"modelgate/cmd/modelgate/wiring"
	"modelgate/deploy"
	"modelgate/deploy/deploytest"
	"modelgate/envoy"
	"modelgate/extproc/config"
)

// safeRetryOn are the retry conditions under which the request never
// reached the provider, so a retry cannot run a generation twice.
var safeRetryOn = []string{"connect-failure", "refused-stream", "reset-before-request"}

func serviceOf(o deploy.Object) *corev1.Service {
	s, _ := o.Value.(*corev1.Service)
	return s
}

// vsRoute is one route of a VirtualService with its exact header matches.
type vsRoute struct {
	at      string
	r       *istioapi.HTTPRoute
	headers map[string]string
	key     string
	ok      bool
}

func newVSRoute(vs named[*istioapi.VirtualService], i int) *vsRoute {
	r := vs.spec.GetHttp()[i]
	v := &vsRoute{at: fmt.Sprintf("VirtualService %s http[%d] %q", vs, i, r.GetName()), r: r, headers: map[string]string{}, ok: true}
	ms := r.GetMatch()
	if len(ms) > 1 {
		v.ok = false
	}
	for _, m := range ms {
		if m.GetUri() != nil || m.GetMethod() != nil || m.GetAuthority() != nil || len(m.GetQueryParams()) > 0 || m.GetPort() != 0 || len(m.GetWithoutHeaders()) > 0 {
			v.ok = false
		}
		for name, sm := range m.GetHeaders() {
			if sm.GetExact() == "" {
				v.ok = false
			}
			v.headers[name] = sm.GetExact()
		}
	}
	v.key = deploytest.HeaderKey(v.headers)
	return v
}

// subset reports whether every header match of a is one of b's.
func subset(a, b map[string]string) bool {
	for k, v := range a {
		if bv, ok := b[k]; !ok || bv != v {
			return false
		}
	}
	return true
}

func checkVirtualServices(objs []deploy.Object, gw *deploytest.Gateway) []error {
	vss := find[*istioapi.VirtualService](objs)
	if len(vss) == 0 {
		return []error{errors.New("no VirtualService")}
	}
	var errs []error
	for _, vs := range vss {
		errs = append(errs, checkVSGateways(objs, vs)...)
		errs = append(errs, checkVirtualService(objs, gw, vs)...)
	}
	return errs
}

// checkVSGateways: every gateway a VirtualService names exists and serves
// its hosts.
func checkVSGateways(objs []deploy.Object, vs named[*istioapi.VirtualService]) []error {
	gateways := map[string]*istioapi.Gateway{}
	for _, g := range find[*istioapi.Gateway](objs) {
		gateways[g.String()] = g.spec
	}
	var errs []error
	for _, ref := range vs.spec.GetGateways() {
		if ref == "mesh" {
			continue
		}
		if !strings.Contains(ref, "/") {
			ref = vs.namespace + "/" + ref
		}
		g, ok := gateways[ref]
		if !ok {
			errs = append(errs, fmt.Errorf("VirtualService %s: no Gateway %s", vs, ref))
			continue
		}
		var served []string
		for _, s := range g.GetServers() {
			for _, h := range s.GetHosts() {
				if _, after, ok := strings.Cut(h, "/"); ok { // namespace/host
					h = after
				}
				served = append(served, h)
			}
		}
		for _, h := range vs.spec.GetHosts() {
			if !slices.Contains(served, h) && !slices.Contains(served, "*") {
				errs = append(errs, fmt.Errorf("VirtualService %s: Gateway %s does not serve host %s", vs, ref, h))
			}
		}
	}
	return errs
}

func checkVirtualService(objs []deploy.Object, gw *deploytest.Gateway, vs named[*istioapi.VirtualService]) []error {
	n := len(vs.spec.GetHttp())
	if n == 0 {
		return []error{fmt.Errorf("VirtualService %s: no http routes", vs)}
	}
	var errs []error
	var routes []*vsRoute
	for i := range n - 1 {
		r := newVSRoute(vs, i)
		if !r.ok || len(r.headers) == 0 {
			errs = append(errs, fmt.Errorf("%s: want one match on exact headers only; the catch-all comes last", r.at))
			continue
		}
		for _, prev := range routes {
			if subset(prev.headers, r.headers) {
				errs = append(errs, fmt.Errorf("%s: unreachable, %s comes first and matches its requests", r.at, prev.at))
			}
		}
		routes = append(routes, r)
	}
	cfg, err := withExtraBackends(objs, gw, routes)
	if err != nil {
		return append(errs, err)
	}
	boot, err := envoy.Bootstrap(wiring.EnvoyConfig(cfg))
	if err != nil {
		return append(errs, err)
	}
	brs, notFound := deploytest.BackendRoutes(boot)
	rps, perr := routePatchesFor(objs, vs)
	if perr != nil {
		errs = append(errs, perr)
	}
	errs = append(errs, checkNamedPatches(vs, rps)...)
	used := map[*vsRoute]bool{}
	for _, br := range brs {
		h := map[string]string{}
		for _, m := range br.GetMatch().GetHeaders() {
			h[m.GetName()] = m.GetStringMatch().GetExact()
		}
		k := deploytest.HeaderKey(h)
		var matched []*vsRoute
		for _, r := range routes {
			if r.key == k {
				matched = append(matched, r)
			}
		}
		if len(matched) != 1 {
			errs = append(errs, fmt.Errorf("VirtualService %s: %d routes match %q of the bootstrap (headers %s); want one", vs, len(matched), br.GetName(), k))
			if len(matched) == 0 {
				errs[len(errs)-1] = fmt.Errorf("VirtualService %s: no route matches %q of the bootstrap (headers %s)", vs, br.GetName(), k)
			}
			continue
		}
		used[matched[0]] = true
		errs = append(errs, checkVSRoute(objs, boot, matched[0], br, rps)...)
	}
	errs = append(errs, checkVSModelPaths(vs, routes, rps, gw.Cfg, gw)...)
	for _, r := range routes {
		if !used[r] {
			errs = append(errs, fmt.Errorf("%s (headers %s) matches no route of the bootstrap: want the routing header %s set to a backend name", r.at, r.key, gw.RoutingHeader))
		}
	}
	return append(errs, checkVSCatchAll(newVSRoute(vs, n-1), notFound)...)
}

// withExtraBackends adds a backend to the cluster config for each routing
// header value that names none of its backends (a provider shown as an
// example): its URL from the route's ServiceEntry and DestinationRule, the
// config's default timeouts.
func withExtraBackends(objs []deploy.Object, gw *deploytest.Gateway, routes []*vsRoute) (*config.Config, error) {
	extra := map[string]deploytest.Upstream{}
	for _, r := range routes {
		name, ok := r.headers[gw.RoutingHeader]
		if !ok {
			continue
		}
		u, err := routeUpstream(objs, r)
		if err != nil {
			return nil, err
		}
		extra[name] = u
	}
	return gw.WithBackends(extra)
}

// routeUpstream resolves a route's one destination through its
// ServiceEntry and DestinationRule to where Envoy connects, and with what
// TLS.
func routeUpstream(objs []deploy.Object, r *vsRoute) (deploytest.Upstream, error) {
	var u deploytest.Upstream
	ds := r.r.GetRoute()
	if len(ds) != 1 || ds[0].GetDestination().GetSubset() != "" {
		return u, fmt.Errorf("%s: want one destination without subset", r.at)
	}
	d := ds[0].GetDestination()
	host, port := d.GetHost(), d.GetPort().GetNumber()
	var se *istioapi.ServiceEntry
	for _, s := range find[*istioapi.ServiceEntry](objs) {
		if containsHost(s.spec.GetHosts(), host) {
			se = s.spec
		}
	}
	if se == nil {
		return u, fmt.Errorf("%s: no ServiceEntry for %s", r.at, host)
	}
	if se.GetLocation() != istioapi.ServiceEntry_MESH_EXTERNAL || se.GetResolution() != istioapi.ServiceEntry_DNS {
		return u, fmt.Errorf("ServiceEntry %s: want location MESH_EXTERNAL and resolution DNS, as the bootstrap's DNS cluster", host)
	}
	var sp *istioapi.ServicePort
	for _, p := range se.GetPorts() {
		if p.GetNumber() == port {
			sp = p
		}
	}
	if sp == nil {
		return u, fmt.Errorf("%s: ServiceEntry %s has no port %d", r.at, host, port)
	}
	if !strings.EqualFold(sp.GetProtocol(), "HTTP") {
		return u, fmt.Errorf("ServiceEntry %s port %d: protocol %s; the route speaks HTTP to it (TLS is originated by the DestinationRule)", host, port, sp.GetProtocol())
	}
	u.Host, u.Port = host, port
	if sp.GetTargetPort() != 0 {
		u.Port = sp.GetTargetPort()
	}
	for _, dr := range find[*istioapi.DestinationRule](objs) {
		if dr.spec.GetHost() != host {
			continue
		}
		tls := dr.spec.GetTrafficPolicy().GetTls()
		for _, pl := range dr.spec.GetTrafficPolicy().GetPortLevelSettings() {
			if pl.GetPort().GetNumber() == port && pl.GetTls() != nil {
				tls = pl.GetTls()
			}
		}
		if tls == nil || tls.GetMode() == istioapi.ClientTLSSettings_DISABLE {
			continue
		}
		if tls.GetMode() != istioapi.ClientTLSSettings_SIMPLE || tls.GetCaCertificates() != "" || tls.GetCredentialName() != "" || tls.GetInsecureSkipVerify().GetValue() {
			return u, fmt.Errorf("DestinationRule %s: want tls mode SIMPLE verified against the OS CAs, as the bootstrap", dr)
		}
		if len(tls.GetSubjectAltNames()) != 1 {
			return u, fmt.Errorf("DestinationRule %s: want one subjectAltName, the name the bootstrap verifies", dr)
		}
		u.SNI, u.SAN = tls.GetSni(), tls.GetSubjectAltNames()[0]
	}
	return u, nil
}

// checkVSRoute compares a route, with the EnvoyFilters' patches on it,
// with the bootstrap route it stands for.
func checkVSRoute(objs []deploy.Object, boot *bootstrapv3.Bootstrap, r *vsRoute, br *routev3.Route, rps []*istioapi.EnvoyFilter_EnvoyConfigObjectPatch) []error {
	var errs []error
	ra := br.GetRoute()
	at := r.at
	if got, want := r.r.GetRewrite().GetAuthority(), ra.GetHostRewriteLiteral(); got != want || r.r.GetRewrite().GetUri() != "" {
		errs = append(errs, fmt.Errorf("%s: rewrite authority %q, want the bootstrap's host_rewrite_literal %q", at, got, want))
	}
	hr := r.r.GetHeaders().GetRequest()
	if got, want := sortedCopy(hr.GetRemove()), sortedCopy(br.GetRequestHeadersToRemove()); !slices.Equal(got, want) || len(hr.GetSet())+len(hr.GetAdd()) > 0 {
		errs = append(errs, fmt.Errorf("%s: headers.request removes %q, want %q (the gateway's headers stop at Envoy)", at, got, want))
	}
	if !sameDuration(r.r.GetTimeout(), ra.GetTimeout()) {
		errs = append(errs, fmt.Errorf("%s: timeout %v, want the bootstrap route's %v (Istio's default is none; set it)", at, r.r.GetTimeout().AsDuration(), ra.GetTimeout().AsDuration()))
	}
	errs = append(errs, checkRetries(at, r.r.GetRetries(), br)...)
	errs = append(errs, checkIdleTimeouts(r, br, deploytest.HCMOf(boot).GetStreamIdleTimeout(), rps)...)
	c := deploytest.ClusterOf(boot, ra.GetCluster())
	want, err := deploytest.UpstreamOf(c)
	if err != nil {
		return append(errs, err)
	}
	got, err := routeUpstream(objs, r)
	if err != nil {
		return append(errs, err)
	}
	if got.Host != want.Host || got.Port != want.Port {
		errs = append(errs, fmt.Errorf("%s: reaches %s, the bootstrap's cluster %s %s", at,
			net.JoinHostPort(got.Host, strconv.Itoa(int(got.Port))), c.GetName(), net.JoinHostPort(want.Host, strconv.Itoa(int(want.Port)))))
	}
	if got.SNI != want.SNI || got.SAN != want.SAN {
		errs = append(errs, fmt.Errorf("%s: DestinationRule TLS sni %q, subjectAltNames %q; want %q and %q as the bootstrap's cluster %s", at, got.SNI, got.SAN, want.SNI, want.SAN, c.GetName()))
	}
	return errs
}

// checkRetries: the per-try timeout (the wait for the answer to start) is
// the bootstrap's; retries only where the request never left. Istio drops
// perTryTimeout with attempts 0, hence at least one attempt.
func checkRetries(at string, rt *istioapi.HTTPRetry, br *routev3.Route) []error {
	var errs []error
	perTry := br.GetRoute().GetRetryPolicy().GetPerTryTimeout()
	if perTry != nil && (rt == nil || rt.GetAttempts() < 1) {
		return append(errs, fmt.Errorf("%s: retries.attempts %d: Istio drops perTryTimeout without attempts; want attempts ≥ 1 on safe conditions", at, rt.GetAttempts()))
	}
	if rt == nil {
		return append(errs, fmt.Errorf("%s: no retries: Istio's default retries 2 times on 503 too", at))
	}
	if !sameDuration(rt.GetPerTryTimeout(), perTry) {
		errs = append(errs, fmt.Errorf("%s: retries.perTryTimeout %v, want the bootstrap's per_try_timeout %v", at, rt.GetPerTryTimeout().AsDuration(), perTry.AsDuration()))
	}
	for c := range strings.SplitSeq(rt.GetRetryOn(), ",") {
		if c = strings.TrimSpace(c); !slices.Contains(safeRetryOn, c) {
			errs = append(errs, fmt.Errorf("%s: retries.retryOn %q: a retry after the request reached the provider could run it twice; want only %q", at, c, safeRetryOn))
		}
	}
	return errs
}

// checkIdleTimeouts: the EnvoyFilters give the route the bootstrap's
// per_try_idle_timeout (streaming routes), and an idle_timeout of at
// least the bootstrap's connection manager stream_idle_timeout, which
// Istio's connection manager lacks (0: none) and which the route's
// replaces.
func checkIdleTimeouts(r *vsRoute, br *routev3.Route, hcmIdle *durationpb.Duration, rps []*istioapi.EnvoyFilter_EnvoyConfigObjectPatch) []error {
	er, err := patchedRoute(r, rps)
	if err != nil {
		return []error{err}
	}
	var errs []error
	got, want := er.GetRoute().GetRetryPolicy().GetPerTryIdleTimeout(), br.GetRoute().GetRetryPolicy().GetPerTryIdleTimeout()
	if !sameDuration(got, want) {
		errs = append(errs, fmt.Errorf("%s: per_try_idle_timeout %v (EnvoyFilter HTTP_ROUTE patches), want the bootstrap's %v (route %q)",
			r.at, durationOrNone(got), durationOrNone(want), br.GetName()))
	}
	if idle := er.GetRoute().GetIdleTimeout(); idle == nil || idle.AsDuration() == 0 || idle.AsDuration() < hcmIdle.AsDuration() {
		errs = append(errs, fmt.Errorf("%s: idle_timeout %v (EnvoyFilter HTTP_ROUTE patches), want at least the bootstrap's stream_idle_timeout %v: Istio's connection manager has none",
			r.at, durationOrNone(idle), hcmIdle.AsDuration()))
	}
	return errs
}

func durationOrNone(d *durationpb.Duration) string {
	if d == nil {
		return "none"
	}
	return d.AsDuration().String()
}

// checkVSCatchAll: the last route answers as the bootstrap's catch-all.
func checkVSCatchAll(r *vsRoute, nf *routev3.Route) []error {
	at := r.at + " (catch-all)"
	if nf == nil {
		return []error{errors.New("the bootstrap has no catch-all route")}
	}
	contentType := ""
	for _, h := range nf.GetResponseHeadersToAdd() {
		if strings.EqualFold(h.GetHeader().GetKey(), "content-type") {
			contentType = h.GetHeader().GetValue()
		}
	}
	dr := r.r.GetDirectResponse()
	want := nf.GetDirectResponse()
	set := r.r.GetHeaders().GetResponse().GetSet()
	if len(r.r.GetMatch()) > 0 || dr == nil || dr.GetStatus() != want.GetStatus() || dr.GetBody().GetString_() != want.GetBody().GetInlineString() ||
		!maps.Equal(set, map[string]string{"content-type": contentType}) {
		return []error{fmt.Errorf("%s: want no match and a directResponse %d %s with content-type %s, as the bootstrap's catch-all",
			at, want.GetStatus(), want.GetBody().GetInlineString(), contentType)}
	}
	return nil
}

// checkNetworkPolicy: the proxies each EnvoyFilter patches may reach the
// ext_proc port of the pods behind the Service.
func checkNetworkPolicy(objs []deploy.Object, gw *deploytest.Gateway) []error {
	port, err := deploytest.GRPCPort(gw.Cfg)
	if err != nil {
		return []error{err}
	}
	var errs []error
	for _, ef := range find[*istioapi.EnvoyFilter](objs) {
		labels := ef.spec.GetWorkloadSelector().GetLabels()
		if !admitted(objs, gw, labels, port) {
			errs = append(errs, fmt.Errorf("EnvoyFilter %s: no NetworkPolicy here admits pods labelled %v to the modelgate pods' port %d", ef, labels, port))
		}
	}
	return errs
}

func admitted(objs []deploy.Object, gw *deploytest.Gateway, labels map[string]string, port int32) bool {
	for _, np := range deploy.Find[*networkingv1.NetworkPolicy](objs) {
		if !selectsModelgate(gw, np) {
			continue
		}
		for _, in := range np.Spec.Ingress {
			portOK := len(in.Ports) == 0
			for _, p := range in.Ports {
				portOK = portOK || p.Port != nil && (p.Port.IntValue() == int(port) || p.Port.String() == "grpc")
			}
			for _, from := range in.From {
				if portOK && from.PodSelector != nil && maps.Equal(from.PodSelector.MatchLabels, labels) && from.NamespaceSelector != nil {
					return true
				}
			}
		}
	}
	return false
}

// selectsModelgate: the policy's pods are those of a Service of
// ../kubernetes in its namespace.
func selectsModelgate(gw *deploytest.Gateway, np *networkingv1.NetworkPolicy) bool {
	for _, s := range gw.Services {
		if s.Namespace == np.Namespace && len(s.Spec.Selector) > 0 && maps.Equal(s.Spec.Selector, np.Spec.PodSelector.MatchLabels) {
			return true
		}
	}
	return false
}

func sameDuration(a, b *durationpb.Duration) bool {
	return (a == nil) == (b == nil) && a.AsDuration() == b.AsDuration()
}

func sortedCopy(s []string) []string {
	s = slices.Clone(s)
	sort.Strings(s)
	return s
}
