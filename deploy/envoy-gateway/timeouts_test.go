package envoygateway_test

// The timeouts on each model's path: the request the ext_proc server
// routes for a model takes the HTTPRoute rule with the most matching
// header matches (Gateway API precedence), and Envoy Gateway builds that
// route's timeouts from the rule, its BackendTrafficPolicy and the
// Gateway's ClientTrafficPolicy. None may be shorter than the model's own
// (deploytest.CheckPath).

import (
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	egv1a1 "github.com/envoyproxy/gateway/api/v1alpha1"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"modelgate/deploy"
	"modelgate/deploy/deploytest"
	"modelgate/extproc/config"
)

// Envoy's defaults where Envoy Gateway sets nothing: the route timeout
// (route.v3.RouteAction.timeout) and the connection manager's
// stream_idle_timeout.
const (
	envoyRouteTimeout = 15 * time.Second
	envoyStreamIdle   = 5 * time.Minute
)

// checkModelPaths checks the timers on every path of cfg's models.
func checkModelPaths(objs []deploy.Object, cfg *config.Config, gw *deploytest.Gateway, g *gwapiv1.Gateway) []error {
	rules, errs := attachedRules(objs, g)
	var ctp *egv1a1.ClientTrafficPolicy
	for _, p := range deploy.Find[*egv1a1.ClientTrafficPolicy](objs) {
		if targets(p.Spec.PolicyTargetReferences, g.Namespace, p.Namespace, "Gateway", g.Name, "") {
			ctp = p
		}
	}
	for _, path := range deploytest.ModelPaths(cfg, gw.RoutingHeader) {
		var best []*ruleRef
		for _, r := range rules {
			if !r.ok || len(r.headers) == 0 || !path.Matches(r.headers) {
				continue
			}
			switch {
			case len(best) == 0 || len(r.headers) > len(best[0].headers):
				best = []*ruleRef{r}
			case len(r.headers) == len(best[0].headers):
				best = append(best, r)
			}
		}
		switch len(best) {
		case 0:
			errs = append(errs, fmt.Errorf("%s: no HTTPRoute rule matches headers %s; the catch-all would answer 404", path, deploytest.HeaderKey(path.Headers)))
			continue
		case 1:
		default:
			errs = append(errs, fmt.Errorf("%s: %s and %s match as many headers; Envoy Gateway would pick by creation time", path, best[0], best[1]))
			continue
		}
		timers, err := ruleTimers(objs, best[0], ctp)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		errs = append(errs, deploytest.CheckPath(path, best[0].String(), timers)...)
	}
	return errs
}

// ruleTimers are the timeouts Envoy Gateway v1.9.1 gives the route of a
// rule: its timeout (processRouteTimeout, internal/gatewayapi/route.go;
// getEffectiveRequestTimeout), the per-try timeout of its
// BackendTrafficPolicy, and its idle timeout (idleTimeout,
// internal/xds/translator/route.go): the policy's streamIdleTimeout if
// set, else the listener's (the ClientTrafficPolicy's) if that is set,
// else one derived from the route timeout.
func ruleTimers(objs []deploy.Object, r *ruleRef, ctp *egv1a1.ClientTrafficPolicy) ([]deploytest.Timer, error) {
	section := ""
	if r.rule.Name != nil {
		section = string(*r.rule.Name)
	}
	var btp *egv1a1.BackendTrafficPolicy
	for _, p := range deploy.Find[*egv1a1.BackendTrafficPolicy](objs) {
		if targets(p.Spec.PolicyTargetReferences, r.route.Namespace, p.Namespace, "HTTPRoute", r.route.Name, section) {
			btp = p
		}
	}
	var timers []deploytest.Timer
	var errs []error
	dur := func(d *gwapiv1.Duration, what string) (time.Duration, bool) {
		if d == nil {
			return 0, false
		}
		v, err := parseDuration(*d)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", what, err))
		}
		return v, true
	}

	var routeTimeout *time.Duration
	routeWhat := ""
	if t := r.rule.Timeouts; t != nil {
		if v, ok := dur(t.Request, "timeouts.request"); ok {
			routeTimeout, routeWhat = &v, r.String()+" timeouts.request"
		}
		if v, ok := dur(t.BackendRequest, "timeouts.backendRequest"); ok && r.rule.Retry == nil {
			routeTimeout, routeWhat = &v, r.String()+" timeouts.backendRequest"
		}
	}
	var ht *egv1a1.HTTPTimeout
	if btp != nil && btp.Spec.Timeout != nil {
		ht = btp.Spec.Timeout.HTTP
	}
	if routeTimeout == nil && ht != nil {
		if v, ok := dur(ht.RequestTimeout, "requestTimeout"); ok {
			routeTimeout, routeWhat = &v, "BackendTrafficPolicy "+btp.Name+" timeout.http.requestTimeout"
		}
	}
	if routeTimeout != nil {
		timers = append(timers, deploytest.Timer{What: routeWhat, Kind: deploytest.Overall, D: *routeTimeout})
	} else {
		timers = append(timers, deploytest.Timer{What: r.String() + " route timeout (unset: Envoy's default)", Kind: deploytest.Overall, D: envoyRouteTimeout})
	}

	if btp != nil && btp.Spec.Retry != nil && btp.Spec.Retry.PerRetry != nil {
		if v, ok := dur(btp.Spec.Retry.PerRetry.Timeout, "perRetry.timeout"); ok {
			timers = append(timers, deploytest.Timer{What: "BackendTrafficPolicy " + btp.Name + " retry.perRetry.timeout", Kind: deploytest.PerTry, D: v})
		}
	}

	var listenerIdle *gwapiv1.Duration
	if ctp != nil && ctp.Spec.Timeout != nil && ctp.Spec.Timeout.HTTP != nil {
		listenerIdle = ctp.Spec.Timeout.HTTP.StreamIdleTimeout
	}
	switch {
	case ht != nil && ht.StreamIdleTimeout != nil:
		v, _ := dur(ht.StreamIdleTimeout, "streamIdleTimeout")
		timers = append(timers, deploytest.Timer{What: "BackendTrafficPolicy " + btp.Name + " timeout.http.streamIdleTimeout (the route's idle_timeout)", Kind: deploytest.StreamIdle, D: v})
	case listenerIdle != nil:
		v, _ := dur(listenerIdle, "streamIdleTimeout")
		timers = append(timers, deploytest.Timer{What: "ClientTrafficPolicy " + ctp.Name + " timeout.http.streamIdleTimeout", Kind: deploytest.Idle, D: v})
	case routeTimeout != nil:
		idle := max(time.Hour, *routeTimeout)
		if *routeTimeout == 0 {
			idle = 0
		}
		timers = append(timers, deploytest.Timer{What: r.String() + " idle_timeout Envoy Gateway derives from the route timeout", Kind: deploytest.Idle, D: idle})
	default:
		timers = append(timers, deploytest.Timer{What: "the connection manager's stream_idle_timeout (no ClientTrafficPolicy sets it: Envoy's default)", Kind: deploytest.Idle, D: envoyStreamIdle})
	}
	return timers, errors.Join(errs...)
}

// The timeouts cover every model of the config shipped with the
// manifests, o3's 900s included; a model with longer timeouts and no
// rules of its own, or today's listener idle timeout of 300s, fails.
func TestTimeoutsCoverModels(t *testing.T) {
	gw := deploytest.LoadGateway(t)
	files := readManifests(t)
	decode := func(t *testing.T, files map[string][]byte) ([]deploy.Object, *gwapiv1.Gateway) {
		t.Helper()
		objs, errs := run(files, nil, nil)
		if len(errs) > 0 {
			t.Fatal(errors.Join(errs...))
		}
		g, errs := checkGateway(objs)
		if g == nil {
			t.Fatal(errors.Join(errs...))
		}
		return objs, g
	}
	slow := *gw.Cfg
	slow.Models = append(slow.Models[:len(slow.Models):len(slow.Models)], config.Model{ID: "o3-pro", OwnedBy: "openai",
		Deployments: []config.Deployment{{Backend: "openai", Model: "o3-pro"}},
		Timeouts:    config.Timeouts{ResponseHeaders: config.Duration{Duration: 1200 * time.Second}, StreamIdle: config.Duration{Duration: 600 * time.Second}}})
	todayCTP := maps.Clone(files)
	const cur, today = "streamIdleTimeout: 910s", "streamIdleTimeout: 300s"
	if !strings.Contains(string(files["gateway.yaml"]), cur) {
		t.Fatalf("gateway.yaml has no %q", cur)
	}
	todayCTP["gateway.yaml"] = []byte(strings.Replace(string(files["gateway.yaml"]), cur, today, 1))

	tests := []struct {
		name  string
		files map[string][]byte
		cfg   *config.Config
		want  []string // each must be in some error; none means no error
	}{
		{name: "shipped", files: files, cfg: gw.Cfg},
		{name: "a model with longer timeouts and no rules of its own", files: files, cfg: &slow, want: []string{
			"model o3-pro on backend openai, non-streamed → HTTPRoute modelgate rules[0]: BackendTrafficPolicy modelgate retry.perRetry.timeout is 5m0s, shorter than 20m0s",
			"model o3-pro on backend openai, non-streamed → HTTPRoute modelgate rules[0]: ClientTrafficPolicy llm timeout.http.streamIdleTimeout is 15m10s, shorter than 20m10s",
			"model o3-pro on backend openai, streamed → HTTPRoute modelgate-stream rules[0]: BackendTrafficPolicy modelgate-stream timeout.http.streamIdleTimeout (the route's idle_timeout) is 1m0s, shorter than 10m0s",
		}},
		{name: "today's listener idle timeout of 300s", files: todayCTP, cfg: gw.Cfg, want: []string{
			"model o3 on backend openai, non-streamed → HTTPRoute modelgate-o3 rules[0]: ClientTrafficPolicy llm timeout.http.streamIdleTimeout is 5m0s, shorter than 15m10s",
			"model gpt-4o on backend openai, non-streamed → HTTPRoute modelgate rules[0]: ClientTrafficPolicy llm timeout.http.streamIdleTimeout is 5m0s, shorter than 5m10s",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs, g := decode(t, tt.files)
			errs := checkModelPaths(objs, tt.cfg, gw, g)
			deploytest.WantReported(t, errs, tt.want)
		})
	}
}
