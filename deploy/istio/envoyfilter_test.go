package istio_test

// The EnvoyFilters: each inserts the bootstrap's ext_proc filter (disabled),
// enables it on one virtual host of a VirtualService, raises the listener's
// and the ext_proc cluster's buffers, and names the cluster Istio builds for
// the ClusterIP Service of ../kubernetes on the config's gRPC port.

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/structpb"
	istioapi "istio.io/api/networking/v1alpha3"

	"modelgate/deploy"
	"modelgate/deploy/deploytest"
)

// Names in the listener the filter is inserted into.
const (
	hcmFilter    = "envoy.filters.network.http_connection_manager"
	routerFilter = "envoy.filters.http.router"
)

// codeDetails is the attribute that tells Envoy's own replies (anything
// but "via_upstream") from the provider's answers.
const codeDetails = "response.code_details"

// decodePatch decodes a patch value as the Envoy message it becomes, as
// istiod does when it applies the patch: protojson refuses unknown
// fields, Struct numbers are float64 (exact below 2^53).
func decodePatch(v *structpb.Struct, m proto.Message) error {
	raw, err := protojson.Marshal(v)
	if err != nil {
		return err
	}
	return protojson.Unmarshal(raw, m)
}

func checkEnvoyFilters(objs []deploy.Object, gw *deploytest.Gateway) []error {
	var errs []error
	efs := find[*istioapi.EnvoyFilter](objs)
	if len(efs) == 0 {
		return []error{fmt.Errorf("no EnvoyFilter")}
	}
	for _, ef := range efs {
		errs = append(errs, checkEnvoyFilter(objs, gw, ef)...)
	}
	return errs
}

func checkEnvoyFilter(objs []deploy.Object, gw *deploytest.Gateway, ef named[*istioapi.EnvoyFilter]) []error {
	at := "EnvoyFilter " + ef.String()
	var errs []error
	if len(ef.spec.GetWorkloadSelector().GetLabels()) == 0 {
		errs = append(errs, fmt.Errorf("%s: no workloadSelector: it would patch every proxy of its namespace (or the mesh)", at))
	}
	patches := map[istioapi.EnvoyFilter_ApplyTo]*istioapi.EnvoyFilter_EnvoyConfigObjectPatch{}
	var routePatches []*istioapi.EnvoyFilter_EnvoyConfigObjectPatch
	ctx := istioapi.EnvoyFilter_ANY
	for i, p := range ef.spec.GetConfigPatches() {
		if p.GetApplyTo() == istioapi.EnvoyFilter_HTTP_ROUTE {
			routePatches = append(routePatches, p) // one per route it sets
		} else if _, dup := patches[p.GetApplyTo()]; dup {
			errs = append(errs, fmt.Errorf("%s: configPatches[%d]: a second %s patch", at, i, p.GetApplyTo()))
		}
		patches[p.GetApplyTo()] = p
		if c := p.GetMatch().GetContext(); i == 0 {
			ctx = c
		} else if c != ctx {
			errs = append(errs, fmt.Errorf("%s: configPatches[%d]: context %s, the first patch's is %s", at, i, c, ctx))
		}
	}
	if ctx != istioapi.EnvoyFilter_GATEWAY && ctx != istioapi.EnvoyFilter_SIDECAR_OUTBOUND {
		errs = append(errs, fmt.Errorf("%s: context %s: want GATEWAY or SIDECAR_OUTBOUND, where routes lead to the providers", at, ctx))
	}
	for _, k := range []istioapi.EnvoyFilter_ApplyTo{istioapi.EnvoyFilter_HTTP_FILTER, istioapi.EnvoyFilter_VIRTUAL_HOST,
		istioapi.EnvoyFilter_LISTENER, istioapi.EnvoyFilter_CLUSTER, istioapi.EnvoyFilter_NETWORK_FILTER, istioapi.EnvoyFilter_HTTP_ROUTE} {
		if patches[k] == nil {
			return append(errs, fmt.Errorf("%s: no %s patch", at, k))
		}
	}
	filterName, cluster, ferrs := checkFilterPatch(at, patches[istioapi.EnvoyFilter_HTTP_FILTER], gw)
	errs = append(errs, ferrs...)
	if cluster.host == "" {
		return errs // the filter did not decode: the rest would only repeat it
	}
	errs = append(errs, checkVirtualHostPatch(objs, at, ef, ctx, filterName, patches)...)
	errs = append(errs, checkBufferPatches(at, patches, cluster, gw)...)
	errs = append(errs, checkEarlyHeaderPatch(at, patches, gw)...)
	return append(errs, checkRoutePatchValues(at, patches[istioapi.EnvoyFilter_VIRTUAL_HOST], routePatches)...)
}

// checkEarlyHeaderPatch: a MERGE into the connection manager of the
// filter's listener adds the bootstrap's early header mutation, which
// removes every header through which a client could steer the router,
// and sets nothing else (it applies to every host of the listener).
func checkEarlyHeaderPatch(at string, patches map[istioapi.EnvoyFilter_ApplyTo]*istioapi.EnvoyFilter_EnvoyConfigObjectPatch, gw *deploytest.Gateway) []error {
	p := patches[istioapi.EnvoyFilter_NETWORK_FILTER]
	at += " NETWORK_FILTER"
	var errs []error
	m := p.GetMatch().GetListener()
	if m.GetFilterChain().GetFilter().GetName() != hcmFilter || m.GetFilterChain().GetFilter().GetSubFilter() != nil || p.GetPatch().GetOperation() != istioapi.EnvoyFilter_Patch_MERGE {
		errs = append(errs, fmt.Errorf("%s: want MERGE into %s", at, hcmFilter))
	}
	if lport := patches[istioapi.EnvoyFilter_HTTP_FILTER].GetMatch().GetListener().GetPortNumber(); m.GetPortNumber() != lport {
		errs = append(errs, fmt.Errorf("%s: listener port %d, the filter's is %d", at, m.GetPortNumber(), lport))
	}
	var f listenerv3.Filter
	if err := decodePatch(p.GetPatch().GetValue(), &f); err != nil {
		return append(errs, fmt.Errorf("%s: value: %w", at, err))
	}
	inner, err := f.GetTypedConfig().UnmarshalNew()
	if err != nil {
		return append(errs, fmt.Errorf("%s: typed_config: %w", at, err))
	}
	h, ok := inner.(*hcmv3.HttpConnectionManager)
	if !ok {
		return append(errs, fmt.Errorf("%s: typed_config is %T, want the HttpConnectionManager", at, inner))
	}
	exts := h.GetEarlyHeaderMutationExtensions()
	if !proto.Equal(h, &hcmv3.HttpConnectionManager{EarlyHeaderMutationExtensions: exts}) || f.GetName() != "" && f.GetName() != hcmFilter {
		errs = append(errs, fmt.Errorf("%s: want only early_header_mutation_extensions: the patch changes every host of the listener", at))
	}
	removed, err := deploytest.EarlyRemovals(exts)
	if err != nil {
		return append(errs, fmt.Errorf("%s: early_header_mutation_extensions%w", at, err))
	}
	want, err := gw.RouterControlHeaders()
	if err != nil {
		return append(errs, err)
	}
	if missing := deploytest.MissingHeaders(want, removed); len(missing) > 0 {
		errs = append(errs, fmt.Errorf("%s: early_header_mutation_extensions do not remove %q: a client could steer Envoy's retries and timeouts with them (the bootstrap removes them)", at, missing))
	}
	return errs
}

// checkRoutePatchValues: every HTTP_ROUTE patch MERGEs into routes of the
// virtual host the filter is enabled on, and sets only idle timeouts (the
// route's idle_timeout, the retry policy's per_try_idle_timeout). What
// they add up to on each route is checked with the VirtualServices.
func checkRoutePatchValues(at string, vhost *istioapi.EnvoyFilter_EnvoyConfigObjectPatch, rps []*istioapi.EnvoyFilter_EnvoyConfigObjectPatch) []error {
	var errs []error
	want := vhost.GetMatch().GetRouteConfiguration()
	for i, p := range rps {
		at := fmt.Sprintf("%s HTTP_ROUTE patch %d", at, i)
		rc := proto.Clone(p.GetMatch().GetRouteConfiguration()).(*istioapi.EnvoyFilter_RouteConfigurationMatch)
		rc.GetVhost().Route = nil
		if p.GetPatch().GetOperation() != istioapi.EnvoyFilter_Patch_MERGE || !proto.Equal(rc, want) {
			errs = append(errs, fmt.Errorf("%s: want MERGE into routes of the VIRTUAL_HOST patch's virtual host (%v)", at, want))
		}
		if _, err := routePatchValue(p); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", at, err))
		}
	}
	return errs
}

// routePatchValue decodes an HTTP_ROUTE patch's value, which may set only
// route.idle_timeout and route.retry_policy.per_try_idle_timeout.
func routePatchValue(p *istioapi.EnvoyFilter_EnvoyConfigObjectPatch) (*routev3.Route, error) {
	var r routev3.Route
	if err := decodePatch(p.GetPatch().GetValue(), &r); err != nil {
		return nil, fmt.Errorf("value: %w", err)
	}
	rest := proto.Clone(&r).(*routev3.Route)
	if ra := rest.GetRoute(); ra != nil {
		ra.IdleTimeout = nil
		if rp := ra.GetRetryPolicy(); rp != nil {
			rp.PerTryIdleTimeout = nil
			if proto.Size(rp) == 0 {
				ra.RetryPolicy = nil
			}
		}
		if proto.Size(ra) == 0 {
			rest.Action = nil
		}
	}
	if proto.Size(rest) > 0 {
		return nil, fmt.Errorf("value sets more than route.idle_timeout and route.retry_policy.per_try_idle_timeout: %v", rest)
	}
	return &r, nil
}

// checkFilterPatch decodes the HTTP_FILTER patch and compares its ext_proc
// filter with the bootstrap's. It returns the filter's name and cluster.
func checkFilterPatch(at string, p *istioapi.EnvoyFilter_EnvoyConfigObjectPatch, gw *deploytest.Gateway) (string, extProcCluster, []error) {
	at += " HTTP_FILTER"
	var errs []error
	fc := p.GetMatch().GetListener().GetFilterChain().GetFilter()
	if fc.GetName() != hcmFilter || fc.GetSubFilter().GetName() != routerFilter || p.GetPatch().GetOperation() != istioapi.EnvoyFilter_Patch_INSERT_BEFORE {
		errs = append(errs, fmt.Errorf("%s: want INSERT_BEFORE %s in %s, as the bootstrap orders them", at, routerFilter, hcmFilter))
	}
	var f hcmv3.HttpFilter
	if err := decodePatch(p.GetPatch().GetValue(), &f); err != nil {
		return "", extProcCluster{}, append(errs, fmt.Errorf("%s: value: %w", at, err))
	}
	if f.GetName() != deploytest.ExtProcFilterID {
		errs = append(errs, fmt.Errorf("%s: filter %q, want %q", at, f.GetName(), deploytest.ExtProcFilterID))
	}
	if !f.GetDisabled() {
		errs = append(errs, fmt.Errorf("%s: want disabled: true, enabled by the VIRTUAL_HOST patch for modelgate's host only", at))
	}
	inner, err := f.GetTypedConfig().UnmarshalNew()
	if err != nil {
		return f.GetName(), extProcCluster{}, append(errs, fmt.Errorf("%s: typed_config: %w", at, err))
	}
	ep, ok := inner.(*extprocv3.ExternalProcessor)
	if !ok {
		return f.GetName(), extProcCluster{}, append(errs, fmt.Errorf("%s: typed_config is %T", at, inner))
	}
	if err := ep.ValidateAll(); err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", at, err))
	}
	// The response attributes are compared apart: the patch asks for
	// more than the bootstrap.
	ignore := protocmp.IgnoreFields(&extprocv3.ExternalProcessor{}, "grpc_service", "response_attributes")
	for name, want := range gw.ExtProcs {
		if diff := cmp.Diff(want, ep, protocmp.Transform(), ignore); diff != "" {
			errs = append(errs, fmt.Errorf("%s: the ext_proc filter differs from the bootstrap's for %s (-bootstrap +patch):\n%s", at, name, diff))
		}
		for _, a := range want.GetResponseAttributes() {
			if !slices.Contains(ep.GetResponseAttributes(), a) {
				errs = append(errs, fmt.Errorf("%s: response_attributes lacks %q, which the bootstrap for %s asks for", at, a, name))
			}
		}
	}
	if !slices.Contains(ep.GetResponseAttributes(), codeDetails) {
		errs = append(errs, fmt.Errorf("%s: response_attributes lacks %q: modelgate would record Envoy's own 503 and 504 as the provider's", at, codeDetails))
	}
	c, cerrs := checkExtProcCluster(at, ep.GetGrpcService().GetEnvoyGrpc().GetClusterName(), gw)
	return f.GetName(), c, append(errs, cerrs...)
}

// extProcCluster is the Istio cluster of the ext_proc Service.
type extProcCluster struct {
	host string
	port uint32
}

// checkExtProcCluster parses outbound|port||host (BuildSubsetKey, istio
// pilot/pkg/model/service.go) and finds the Service behind it.
func checkExtProcCluster(at, name string, gw *deploytest.Gateway) (extProcCluster, []error) {
	parts := strings.Split(name, "|")
	if len(parts) != 4 || parts[0] != "outbound" || parts[2] != "" {
		return extProcCluster{}, []error{fmt.Errorf("%s: cluster_name %q: want outbound|<port>||<host>", at, name)}
	}
	port, err := strconv.ParseUint(parts[1], 10, 16)
	c := extProcCluster{host: parts[3], port: uint32(port)}
	var errs []error
	want, werr := deploytest.GRPCPort(gw.Cfg)
	if err != nil || werr != nil || int32(port) != want {
		errs = append(errs, fmt.Errorf("%s: cluster %q: port %s, want server.grpc_listen's port %d", at, name, parts[1], want))
	}
	svcName, ns, ok := strings.Cut(strings.TrimSuffix(c.host, "."+deploytest.ClusterDNSZone), ".")
	svc := gw.Services[ns+"/"+svcName]
	if !ok || svc == nil || !strings.HasSuffix(c.host, "."+deploytest.ClusterDNSZone) {
		return c, append(errs, fmt.Errorf("%s: cluster %q: %s is no Service of %s", at, name, c.host, deploytest.KubernetesDir))
	}
	if svc.Spec.ClusterIP == "None" {
		errs = append(errs, fmt.Errorf("%s: Service %s is headless: sidecars would get an ORIGINAL_DST cluster the gRPC client cannot use", at, svc.Name))
	}
	found := false
	for _, sp := range svc.Spec.Ports {
		if uint32(sp.Port) != c.port {
			continue
		}
		found = true
		if ap := sp.AppProtocol; (ap == nil || *ap != "grpc") && sp.Name != "grpc" && !strings.HasPrefix(sp.Name, "grpc-") {
			errs = append(errs, fmt.Errorf("%s: Service %s port %d: appProtocol grpc (or a grpc port name) makes Istio speak HTTP/2 to it", at, svc.Name, sp.Port))
		}
		if tp := sp.TargetPort; tp.String() != "grpc" && tp.IntValue() != int(want) {
			errs = append(errs, fmt.Errorf("%s: Service %s port %d targets %s, want the container port grpc (%d)", at, svc.Name, sp.Port, tp.String(), want))
		}
	}
	if !found {
		errs = append(errs, fmt.Errorf("%s: Service %s has no port %d", at, svc.Name, c.port))
	}
	return c, errs
}

// checkVirtualHostPatch: the patch enables the filter (an empty config in
// Envoy's FilterConfig) on the virtual host of a VirtualService bound to
// this proxy.
func checkVirtualHostPatch(objs []deploy.Object, at string, ef named[*istioapi.EnvoyFilter], ctx istioapi.EnvoyFilter_PatchContext,
	filterName string, patches map[istioapi.EnvoyFilter_ApplyTo]*istioapi.EnvoyFilter_EnvoyConfigObjectPatch) []error {
	p := patches[istioapi.EnvoyFilter_VIRTUAL_HOST]
	at += " VIRTUAL_HOST"
	var errs []error
	if p.GetPatch().GetOperation() != istioapi.EnvoyFilter_Patch_MERGE {
		errs = append(errs, fmt.Errorf("%s: want operation MERGE", at))
	}
	var vh routev3.VirtualHost
	if err := decodePatch(p.GetPatch().GetValue(), &vh); err != nil {
		return append(errs, fmt.Errorf("%s: value: %w", at, err))
	}
	enable, ok := vh.GetTypedPerFilterConfig()[filterName]
	if !ok {
		return append(errs, fmt.Errorf("%s: typed_per_filter_config has no %q", at, filterName))
	}
	m, err := enable.UnmarshalNew()
	if err != nil {
		return append(errs, fmt.Errorf("%s: %w", at, err))
	}
	// Envoy: a FilterConfig without config is an error, with an empty one
	// it enables the filter (router/per_filter_config.cc).
	fc, ok := m.(*routev3.FilterConfig)
	if !ok || fc.GetConfig() == nil || fc.GetConfig().GetTypeUrl() != "" || fc.GetDisabled() {
		errs = append(errs, fmt.Errorf("%s: want a route.v3.FilterConfig with config: {} to enable %s", at, filterName))
	}
	if err := fc.ValidateAll(); err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", at, err))
	}
	rc := p.GetMatch().GetRouteConfiguration()
	host := rc.GetVhost().GetDomainName()
	if ctx == istioapi.EnvoyFilter_SIDECAR_OUTBOUND {
		// Outbound virtual hosts are named host:port.
		h, port, _ := strings.Cut(rc.GetVhost().GetName(), ":")
		host = h
		lport := patches[istioapi.EnvoyFilter_HTTP_FILTER].GetMatch().GetListener().GetPortNumber()
		if port != strconv.Itoa(int(rc.GetPortNumber())) || lport != rc.GetPortNumber() || !servicePort(objs, h, lport) {
			errs = append(errs, fmt.Errorf("%s: vhost %q, routeConfiguration port %d, listener port %d: want host:port of a Service port, the same port thrice",
				at, rc.GetVhost().GetName(), rc.GetPortNumber(), lport))
		}
	}
	if !boundHost(objs, ef.spec.GetWorkloadSelector().GetLabels(), ctx, host) {
		errs = append(errs, fmt.Errorf("%s: %q is no host of a VirtualService on the proxies %v select", at, host, ef.spec.GetWorkloadSelector().GetLabels()))
	}
	return errs
}

// servicePort reports whether a Service of the manifests is host (its
// cluster name) with that port.
func servicePort(objs []deploy.Object, host string, port uint32) bool {
	for _, o := range objs {
		if o.Kind != "Service" || host != o.Name+"."+o.Namespace+"."+deploytest.ClusterDNSZone {
			continue
		}
		for _, p := range serviceOf(o).Spec.Ports {
			if uint32(p.Port) == port {
				return true
			}
		}
	}
	return false
}

// boundHost reports whether host is a host of a VirtualService that the
// proxies with these labels serve: through an Istio Gateway selecting them
// (GATEWAY), or the mesh (sidecars).
func boundHost(objs []deploy.Object, labels map[string]string, ctx istioapi.EnvoyFilter_PatchContext, host string) bool {
	gateways := map[string]*istioapi.Gateway{}
	for _, g := range find[*istioapi.Gateway](objs) {
		gateways[g.String()] = g.spec
	}
	for _, vs := range find[*istioapi.VirtualService](objs) {
		if !containsHost(vs.spec.GetHosts(), host) {
			continue
		}
		for _, ref := range vs.spec.GetGateways() {
			if ctx == istioapi.EnvoyFilter_SIDECAR_OUTBOUND && ref == "mesh" {
				return true
			}
			if !strings.Contains(ref, "/") {
				ref = vs.namespace + "/" + ref
			}
			if g, ok := gateways[ref]; ok && ctx == istioapi.EnvoyFilter_GATEWAY && maps.Equal(g.GetSelector(), labels) {
				return true
			}
		}
	}
	return false
}

func containsHost(hosts []string, h string) bool {
	for _, x := range hosts {
		if x == h {
			return true
		}
	}
	return false
}

// checkBufferPatches: the listener's buffer caps buffered bodies, the
// ext_proc cluster's carries them to modelgate; both as the bootstrap's.
func checkBufferPatches(at string, patches map[istioapi.EnvoyFilter_ApplyTo]*istioapi.EnvoyFilter_EnvoyConfigObjectPatch, c extProcCluster, gw *deploytest.Gateway) []error {
	var errs []error
	lp, cp := patches[istioapi.EnvoyFilter_LISTENER], patches[istioapi.EnvoyFilter_CLUSTER]
	var l listenerv3.Listener
	if err := decodePatch(lp.GetPatch().GetValue(), &l); err != nil {
		errs = append(errs, fmt.Errorf("%s LISTENER: value: %w", at, err))
	}
	want := deploytest.ListenerOf(gw.Boot).GetPerConnectionBufferLimitBytes().GetValue()
	limit := max(gw.Cfg.Limits.MaxRequestBodyBytes, gw.Cfg.Limits.MaxAudioBytes)
	if got := l.GetPerConnectionBufferLimitBytes().GetValue(); lp.GetPatch().GetOperation() != istioapi.EnvoyFilter_Patch_MERGE || got < want || int64(got) <= limit {
		errs = append(errs, fmt.Errorf("%s LISTENER: MERGE per_connection_buffer_limit_bytes %d: want at least the bootstrap's %d and above the largest request body (%d)", at, got, want, limit))
	}
	if lport := patches[istioapi.EnvoyFilter_HTTP_FILTER].GetMatch().GetListener().GetPortNumber(); lp.GetMatch().GetListener().GetPortNumber() != lport {
		errs = append(errs, fmt.Errorf("%s LISTENER: listener port %d, the filter's is %d", at, lp.GetMatch().GetListener().GetPortNumber(), lport))
	}
	m := cp.GetMatch().GetCluster()
	if m.GetService() != c.host || m.GetPortNumber() != c.port || m.GetSubset() != "" || m.GetName() != "" {
		errs = append(errs, fmt.Errorf("%s CLUSTER: matches service %q port %d, want the ext_proc cluster's %s port %d", at, m.GetService(), m.GetPortNumber(), c.host, c.port))
	}
	var cl clusterv3.Cluster
	if err := decodePatch(cp.GetPatch().GetValue(), &cl); err != nil {
		errs = append(errs, fmt.Errorf("%s CLUSTER: value: %w", at, err))
	}
	want = deploytest.ClusterOf(gw.Boot, "modelgate_extproc").GetPerConnectionBufferLimitBytes().GetValue()
	if got := cl.GetPerConnectionBufferLimitBytes().GetValue(); cp.GetPatch().GetOperation() != istioapi.EnvoyFilter_Patch_MERGE || got < want {
		errs = append(errs, fmt.Errorf("%s CLUSTER: MERGE per_connection_buffer_limit_bytes %d: want at least the bootstrap's ext_proc cluster's %d", at, got, want))
	}
	return errs
}
