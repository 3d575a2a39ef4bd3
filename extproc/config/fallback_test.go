package config

import (
	"strings"
	"testing"
	"time"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"github.com/google/go-cmp/cmp"

	"modelgate/envoy"
	"modelgate/extproc/routing"
)

const withFallback = `
backends:
  - {name: openai, provider: openai, base_url: https://api.openai.com, api_key_env: K, timeouts: {response_headers: 40s}}
  - {name: claude, provider: anthropic, base_url: https://api.anthropic.com, api_key_env: K}
models:
  - id: gpt-4o
    deployments:
      - {backend: openai, model: gpt-4o}
      - {backend: claude, model: claude-sonnet-4, priority: 1, weight: 2}
    fallback: {retry_on: [connect-failure, 429], outlier: {consecutive: 2}}
  - id: plain
    deployments: [{backend: openai, model: gpt-4o-mini}]
fallback: {retries: 3, max_retry_after: 20s, outlier: {base_ejection: 10s}}
`

// A model's fallback takes its unset members from the top-level defaults
// and reaches Envoy's configuration; 429 may be written as a number. Its
// attempts are bounded by the model's timeouts, else those of its first
// deployment's backend.
func TestFallbackConfig(t *testing.T) {
	cfg, err := Parse([]byte(withFallback))
	if err != nil {
		t.Fatal(err)
	}
	ec := cfg.EnvoyConfig()
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

func TestFallbackConfigProblems(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{strings.Replace(withFallback, "[connect-failure, 429]", "[connect-failure, 503]", 1), `models[0].fallback.retry_on[1]: "503" is not one of`},
		{strings.Replace(withFallback, "{retries: 3,", "{retries: 11,", 1), "fallback.retries: must be 0 to 10"},
		{strings.Replace(withFallback, "model: gpt-4o-mini}]", "model: gpt-4o-mini, priority: 1}]", 1), "models[1].deployments[0].priority: applies to a model with fallback"},
		{strings.Replace(withFallback, "backend: claude, model: claude-sonnet-4", "backend: openai, model: claude-sonnet-4", 1), "serves the model twice"},
		{strings.Replace(withFallback, "outlier: {consecutive: 2}", "outlier: {consecutiv: 2}", 1), `models[0].fallback.outlier.consecutiv: unknown key; did you mean "consecutive"`},
		{strings.Replace(withFallback, "max_retry_after: 20s", "max_retry_after: 20", 1), "fallback.max_retry_after"},
	} {
		_, err := Parse([]byte(tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("got %v, want %q", err, tc.want)
		}
	}
}
