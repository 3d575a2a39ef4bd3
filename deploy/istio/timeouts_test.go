package istio_test

// The idle timeouts VirtualService cannot express, and the timeouts on
// each model's path. Istio sets the connection manager's
// stream_idle_timeout to 0 (none) on every proxy (istio/istio
// pilot/pkg/networking/core/listener_builder.go, 1.26 to 1.31), so the
// EnvoyFilters give modelgate's routes an idle_timeout, which replaces the
// connection manager's on that route (Envoy route.v3.RouteAction
// idle_timeout), and the streaming routes the bootstrap's
// per_try_idle_timeout. A request for a model takes the first route of
// the VirtualService whose header matches it meets; its timers are the
// route's timeout and perTryTimeout and what the patches add
// (deploytest.CheckPath).

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/proto"
	istioapi "istio.io/api/networking/v1alpha3"

	"modelgate/deploy"
	"modelgate/deploy/deploytest"
	"modelgate/envoy/routing"
	"modelgate/extproc/config"
)

// routePatchesFor lists, in order, the HTTP_ROUTE patches that reach the
// virtual host of a VirtualService: those of EnvoyFilters on the proxies
// serving it (through an Istio Gateway whose selector is the filter's
// workloadSelector, GATEWAY; or the mesh, SIDECAR_OUTBOUND) whose virtual
// host match names one of its hosts (Istio names a gateway's virtual
// hosts host:port with host among their domains, a sidecar's outbound
// ones host:port; rc_patch.go, virtualHostMatch).
func routePatchesFor(objs []deploy.Object, vs named[*istioapi.VirtualService]) ([]*istioapi.EnvoyFilter_EnvoyConfigObjectPatch, error) {
	gateways := map[string]*istioapi.Gateway{}
	for _, g := range find[*istioapi.Gateway](objs) {
		gateways[g.String()] = g.spec
	}
	var out []*istioapi.EnvoyFilter_EnvoyConfigObjectPatch
	var errs []error
	for _, ef := range find[*istioapi.EnvoyFilter](objs) {
		labels := ef.spec.GetWorkloadSelector().GetLabels()
		for i, p := range ef.spec.GetConfigPatches() {
			if p.GetApplyTo() != istioapi.EnvoyFilter_HTTP_ROUTE {
				continue
			}
			ctx := p.GetMatch().GetContext()
			bound := false
			for _, ref := range vs.spec.GetGateways() {
				if ref == "mesh" {
					bound = bound || ctx == istioapi.EnvoyFilter_SIDECAR_OUTBOUND
					continue
				}
				if !strings.Contains(ref, "/") {
					ref = vs.namespace + "/" + ref
				}
				if g, ok := gateways[ref]; ok && ctx == istioapi.EnvoyFilter_GATEWAY && maps.Equal(g.GetSelector(), labels) {
					bound = true
				}
			}
			vh := p.GetMatch().GetRouteConfiguration().GetVhost()
			hostOK := slices.ContainsFunc(vs.spec.GetHosts(), func(h string) bool {
				name, _, _ := strings.Cut(vh.GetName(), ":")
				return (vh.GetName() == "" || name == h) && (vh.GetDomainName() == "" || vh.GetDomainName() == h)
			})
			if !bound || !hostOK {
				continue
			}
			if _, err := routePatchValue(p); err != nil {
				errs = append(errs, fmt.Errorf("EnvoyFilter %s configPatches[%d]: %w", ef, i, err))
				continue
			}
			out = append(out, p)
		}
	}
	return out, errors.Join(errs...)
}

// envoyRouteName is the name Istio gives the Envoy route of a
// VirtualService route: its name, with ".<match name>" when its match is
// named (pilot/pkg/networking/core/route/route.go, translateRoute).
func envoyRouteName(r *istioapi.HTTPRoute) string {
	name := r.GetName()
	if ms := r.GetMatch(); len(ms) == 1 && ms[0].GetName() != "" {
		name += "." + ms[0].GetName()
	}
	return name
}

// patchedRoute is what the patches make of a VirtualService route's
// Envoy route, as far as they set it: the patches whose route match
// (name, action) takes the route, merged in order.
func patchedRoute(r *vsRoute, rps []*istioapi.EnvoyFilter_EnvoyConfigObjectPatch) (*routev3.Route, error) {
	name := envoyRouteName(r.r)
	out := &routev3.Route{Name: name, Action: &routev3.Route_Route{Route: &routev3.RouteAction{}}}
	for _, p := range rps {
		m := p.GetMatch().GetRouteConfiguration().GetVhost().GetRoute()
		if m.GetName() != "" && m.GetName() != name {
			continue
		}
		if a := m.GetAction(); a != istioapi.EnvoyFilter_RouteConfigurationMatch_RouteMatch_ANY && a != istioapi.EnvoyFilter_RouteConfigurationMatch_RouteMatch_ROUTE {
			continue
		}
		v, err := routePatchValue(p)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", r.at, err)
		}
		proto.Merge(out, v)
	}
	return out, nil
}

// checkNamedPatches: every patch for a route by name finds it (a renamed
// route would silently lose its idle timeout), and the names are unique.
func checkNamedPatches(vs named[*istioapi.VirtualService], rps []*istioapi.EnvoyFilter_EnvoyConfigObjectPatch) []error {
	var errs []error
	names := map[string]int{}
	for _, r := range vs.spec.GetHttp() {
		names[envoyRouteName(r)]++
	}
	for name, n := range names {
		if n > 1 {
			errs = append(errs, fmt.Errorf("VirtualService %s: %d routes named %q: the EnvoyFilters' patches by name would hit them all", vs, n, name))
		}
	}
	for _, p := range rps {
		if name := p.GetMatch().GetRouteConfiguration().GetVhost().GetRoute().GetName(); name != "" && names[name] == 0 {
			errs = append(errs, fmt.Errorf("VirtualService %s: an EnvoyFilter HTTP_ROUTE patch names route %q, which it does not have: that patch does nothing", vs, name))
		}
	}
	return errs
}

// checkVSModelPaths checks the timers on every path of cfg's models
// through a VirtualService (routes in order, the catch-all left out).
func checkVSModelPaths(vs named[*istioapi.VirtualService], routes []*vsRoute, rps []*istioapi.EnvoyFilter_EnvoyConfigObjectPatch,
	cfg *config.Config, gw *deploytest.Gateway) []error {
	var errs []error
	for _, path := range deploytest.ModelPaths(cfg, gw.RoutingHeader) {
		i := slices.IndexFunc(routes, func(r *vsRoute) bool { return path.Matches(r.headers) })
		if i < 0 {
			errs = append(errs, fmt.Errorf("%s: no route of VirtualService %s matches headers %s; the catch-all would answer 404", path, vs, deploytest.HeaderKey(path.Headers)))
			continue
		}
		timers, err := vsTimers(routes[i], rps)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		errs = append(errs, deploytest.CheckPath(path, routes[i].at, timers)...)
	}
	return errs
}

// vsTimers are the timeouts on a VirtualService route's Envoy route: its
// timeout (Istio's default: none), perTryTimeout (dropped without
// attempts), and the idle timeouts of the patches. Without an
// idle_timeout of its own the connection manager's applies, which Istio
// sets to 0.
func vsTimers(r *vsRoute, rps []*istioapi.EnvoyFilter_EnvoyConfigObjectPatch) ([]deploytest.Timer, error) {
	er, err := patchedRoute(r, rps)
	if err != nil {
		return nil, err
	}
	timers := []deploytest.Timer{{What: "timeout", Kind: deploytest.Overall, D: r.r.GetTimeout().AsDuration()}}
	if rt := r.r.GetRetries(); rt.GetAttempts() > 0 && rt.GetPerTryTimeout() != nil {
		timers = append(timers, deploytest.Timer{What: "retries.perTryTimeout", Kind: deploytest.PerTry, D: rt.GetPerTryTimeout().AsDuration()})
	}
	if idle := er.GetRoute().GetIdleTimeout(); idle != nil {
		timers = append(timers, deploytest.Timer{What: "the EnvoyFilter's route idle_timeout", Kind: deploytest.Idle, D: idle.AsDuration()})
	} else {
		timers = append(timers, deploytest.Timer{What: "Istio's connection manager stream_idle_timeout (0: none)", Kind: deploytest.Idle})
	}
	if d := er.GetRoute().GetRetryPolicy().GetPerTryIdleTimeout(); d != nil {
		timers = append(timers, deploytest.Timer{What: "the EnvoyFilter's per_try_idle_timeout", Kind: deploytest.StreamIdle, D: d.AsDuration()})
	}
	return timers, nil
}

// The timeouts cover every model of the config shipped with the
// manifests, o3's 900s included. A model with longer timeouts and no
// routes of its own fails, and so do today's manifests (no o3 routes, no
// idle timeouts).
func TestTimeoutsCoverModels(t *testing.T) {
	gw := deploytest.LoadGateway(t)
	objs, errs := run(readManifests(t), nil)
	if len(errs) > 0 {
		t.Fatal(errors.Join(errs...))
	}
	slow := *gw.Cfg
	slow.Models = append(slow.Models[:len(slow.Models):len(slow.Models)], config.Model{ID: "o3-pro", OwnedBy: "openai",
		Deployments: []config.Deployment{{Backend: "openai", Model: "o3-pro"}},
		Timeouts:    config.Timeouts{ResponseHeaders: config.Duration{Duration: 1200 * time.Second}, StreamIdle: config.Duration{Duration: 600 * time.Second}}})
	const gwVS = "VirtualService modelgate/llm "
	tests := []struct {
		name  string
		cfg   *config.Config
		today bool     // only the routes of today's manifests, without the patches
		want  []string // each must be in some error; none means no error
	}{
		{name: "shipped", cfg: gw.Cfg},
		{name: "a model with longer timeouts and no routes of its own", cfg: &slow, want: []string{
			"model o3-pro on backend openai, non-streamed → " + gwVS + `http[3] "openai": retries.perTryTimeout is 5m0s, shorter than 20m0s`,
			"model o3-pro on backend openai, non-streamed → " + gwVS + `http[3] "openai": the EnvoyFilter's route idle_timeout is 15m10s, shorter than 20m10s`,
			"model o3-pro on backend openai, streamed → " + gwVS + `http[2] "openai-stream": the EnvoyFilter's per_try_idle_timeout is 1m0s, shorter than 10m0s`,
		}},
		{name: "today's manifests", cfg: gw.Cfg, today: true, want: []string{
			"model o3 on backend openai, non-streamed → " + gwVS + `http[3] "openai": retries.perTryTimeout is 5m0s, shorter than 15m0s`,
			"model gpt-4o on backend openai, streamed → " + gwVS + `http[3] "openai": no idle timeout bounds the stream`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var errs []error
			for _, vs := range find[*istioapi.VirtualService](objs) {
				var routes []*vsRoute
				for i := range len(vs.spec.GetHttp()) - 1 {
					r := newVSRoute(vs, i)
					if _, stream := r.headers[routing.StreamHeader]; !tt.today || r.headers[routing.ModelHeader] == "" && !stream {
						routes = append(routes, r)
					}
				}
				rps, err := routePatchesFor(objs, vs)
				if err != nil {
					t.Fatal(err)
				}
				if tt.today {
					rps = nil
				}
				errs = append(errs, checkVSModelPaths(vs, routes, rps, tt.cfg, gw)...)
			}
			deploytest.WantReported(t, errs, tt.want)
		})
	}
}
