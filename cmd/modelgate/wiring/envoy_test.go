package wiring_test

import (
	"os"
	"testing"
	"time"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"github.com/google/go-cmp/cmp"

	"modelgate/cmd/modelgate/wiring"
	"modelgate/envoy"
	"modelgate/envoy/routing"
	"modelgate/extproc/config"
)

// withFallback is the config file package's fallback example.
var withFallback = func() string {
	b, err := os.ReadFile("../../../extproc/config/testdata/fallback.yaml")
	if err != nil {
		panic(err)
	}
	return string(b)
}()

// A model's fallback takes its unset members from the top-level defaults
// and reaches Envoy's configuration; 429 may be written as a number. Its
// attempts are bounded by the model's timeouts, else those of its first
// deployment's backend.
func TestFallbackConfig(t *testing.T) {
	cfg, err := config.Parse([]byte(withFallback))
	if err != nil {
		t.Fatal(err)
	}
	ec := wiring.EnvoyConfig(cfg)
	var fallbacks []routing.Model
	for _, m := range ec.Routing.Models {
		if m.Fallback != nil {
			fallbacks = append(fallbacks, m)
		}
	}
	if len(fallbacks) != 1 {
		t.Fatalf("fallbacks %+v", fallbacks)
	}
	f := fallbacks[0]
	type fallback struct {
		Model       string
		Deployments []routing.Deployment
		Fallback    routing.Fallback
	}
	want := fallback{Model: "gpt-4o",
		Deployments: []routing.Deployment{{Backend: "openai", Model: "gpt-4o", Weight: 0}, {Backend: "claude", Model: "claude-sonnet-4", Priority: 1, Weight: 2}},
		Fallback: routing.Fallback{Retries: 3, RetryOn: []routing.RetryCondition{routing.RetryConnect, routing.Retry429}, MaxRetryAfter: 20 * time.Second,
			Outlier: routing.Outlier{Consecutive: 2, BaseEjection: 10 * time.Second}},
	}
	if diff := cmp.Diff(want, fallback{f.ID, f.Deployments, *f.Fallback}); diff != "" {
		t.Errorf("fallback (-want +got):\n%s", diff)
	}
	b, err := envoy.Bootstrap(ec)
	if err != nil {
		t.Fatalf("bootstrap: %v", err)
	}
	wantTimeouts := routing.Timeouts{ResponseHeaders: 40 * time.Second, StreamIdle: 60 * time.Second}
	if got := fallbackTimeouts(t, b, envoy.ModelCluster("gpt-4o")); got != wantTimeouts {
		t.Errorf("fallback timeouts %+v, want %+v", got, wantTimeouts)
	}
}

// fallbackTimeouts are the per-try timeouts of a model cluster's routes:
// per_try_timeout of the route of buffered requests, per_try_idle_timeout
// of the streaming one.
func fallbackTimeouts(t *testing.T, b *bootstrapv3.Bootstrap, cluster string) routing.Timeouts {
	t.Helper()
	var hcm hcmv3.HttpConnectionManager
	if err := b.GetStaticResources().GetListeners()[0].GetFilterChains()[0].GetFilters()[0].GetTypedConfig().UnmarshalTo(&hcm); err != nil {
		t.Fatal(err)
	}
	var got routing.Timeouts
	for _, r := range hcm.GetRouteConfig().GetVirtualHosts()[0].GetRoutes() {
		switch rp := r.GetRoute().GetRetryPolicy(); r.GetName() {
		case cluster:
			got.ResponseHeaders = rp.GetPerTryTimeout().AsDuration()
		case cluster + "/stream":
			got.StreamIdle = rp.GetPerTryIdleTimeout().AsDuration()
		}
	}
	return got
}

// Envoy's own tracing goes to the gateway's collector, under the gateway's
// service name with -envoy; without tracing.envoy it is off.
func TestEnvoyTracing(t *testing.T) {
	cfg, err := config.Parse([]byte(`observability:
  tracing: {otlp_endpoint: "http://collector:4317", sample: 0.5, envoy: true}
`))
	if err != nil {
		t.Fatal(err)
	}
	if tr := wiring.EnvoyConfig(cfg).Tracing; tr.Collector != "collector:4317" || tr.ServiceName != "modelgate-envoy" {
		t.Errorf("Envoy tracing = %+v", tr)
	}
	defaults, _ := config.Parse([]byte("{}\n"))
	if tr := wiring.EnvoyConfig(defaults).Tracing; tr.Collector != "" {
		t.Errorf("defaults: %+v", tr)
	}
}
