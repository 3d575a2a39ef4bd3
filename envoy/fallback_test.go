package envoy

import (
	"slices"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	upstreamsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
)

func fallbackConfig() Config {
	return Config{ExtProcAddress: "127.0.0.1:50051",
		Backends: []Backend{
			{Name: "openai", BaseURL: "https://api.openai.com", Timeouts: Timeouts{ResponseHeaders: time.Minute}},
			{Name: "anthropic", BaseURL: "https://api.anthropic.com"},
			{Name: "local", BaseURL: "http://127.0.0.1:9000"},
		},
		Fallbacks: []Fallback{{
			Model:       "GPT/4o",
			Deployments: []Deployment{{Backend: "openai"}, {Backend: "anthropic", Priority: 1}, {Backend: "local", Priority: 1, Weight: 3}},
			Timeouts:    Timeouts{ResponseHeaders: 30 * time.Second, StreamIdle: 20 * time.Second},
		}},
	}
}

// A model with fallback gets a cluster of its deployments and routes on
// its model header ahead of the backends'; the whole bootstrap passes the
// proto validation.
func TestFallbackBootstrap(t *testing.T) {
	b, err := Bootstrap(fallbackConfig())
	if err != nil {
		t.Fatal(err)
	}
	if err := Validate(b); err != nil {
		t.Fatal(err)
	}
	y, err := MarshalYAML(b)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := LoadYAML(y); err != nil {
		t.Fatalf("round trip: %v", err)
	}
	name := ModelCluster("GPT/4o")
	if name != "model_gpt_4o" {
		t.Errorf("cluster name %q", name)
	}
	var c *clusterv3.Cluster
	for _, cl := range b.GetStaticResources().GetClusters() {
		if cl.GetName() == name {
			c = cl
		}
	}
	if c == nil {
		t.Fatalf("no cluster %s", name)
	}
	if c.GetType() != clusterv3.Cluster_STRICT_DNS || c.GetLbPolicy() != clusterv3.Cluster_LEAST_REQUEST ||
		c.GetCommonLbConfig().GetHealthyPanicThreshold().GetValue() != 0 || c.GetOutlierDetection().GetConsecutive_5Xx().GetValue() != defaultConsecutive {
		t.Errorf("cluster %v", c)
	}
	eps := c.GetLoadAssignment().GetEndpoints()
	want := []struct {
		backend, host string
		priority      uint32
		tls           bool
	}{{"openai", "api.openai.com", 0, true}, {"anthropic", "api.anthropic.com", 1, true}, {"local", "127.0.0.1:9000", 1, false}}
	if len(eps) != len(want) {
		t.Fatalf("%d endpoints", len(eps))
	}
	for i, w := range want {
		ep := eps[i].GetLbEndpoints()[0]
		md := ep.GetMetadata().GetFilterMetadata()
		if eps[i].GetPriority() != w.priority || ep.GetEndpoint().GetHostname() != w.host ||
			md[defaultMetadataNamespace].GetFields()[BackendMetadataKey].GetStringValue() != w.backend ||
			(md[transportSocketMatchKey] != nil) != w.tls {
			t.Errorf("endpoint %d: priority %d, %v", i, eps[i].GetPriority(), ep)
		}
	}
	if len(c.GetTransportSocketMatches()) != 1 {
		t.Errorf("transport socket matches %v", c.GetTransportSocketMatches())
	}
	var opts upstreamsv3.HttpProtocolOptions
	if err := c.GetTypedExtensionProtocolOptions()[httpProtocolOptionsKey].UnmarshalTo(&opts); err != nil {
		t.Fatal(err)
	}
	fs := opts.GetHttpFilters()
	if len(fs) != 2 || fs[0].GetName() != upstreamExtProcFilter || fs[1].GetName() != upstreamCodecFilter {
		t.Fatalf("upstream filters %v", fs)
	}
	var ep extprocv3.ExternalProcessor
	if err := fs[0].GetTypedConfig().UnmarshalTo(&ep); err != nil {
		t.Fatal(err)
	}
	if m := ep.GetProcessingMode(); m.GetRequestBodyMode() != extprocv3.ProcessingMode_BUFFERED || m.GetResponseBodyMode() != extprocv3.ProcessingMode_NONE ||
		!slices.Equal(ep.GetRequestAttributes(), UpstreamAttributes("io.modelgate")) {
		t.Errorf("upstream ext_proc %v", &ep)
	}

	rs := hcmOf(t, b).GetRouteConfig().GetVirtualHosts()[0].GetRoutes()
	if rs[0].GetName() != name+"/stream" || rs[1].GetName() != name {
		t.Fatalf("the model's routes do not come first: %s, %s", rs[0].GetName(), rs[1].GetName())
	}
	for i, r := range rs[:2] {
		ra := r.GetRoute()
		rp := ra.GetRetryPolicy()
		if r.GetMatch().GetHeaders()[0].GetName() != ModelHeader || ra.GetCluster() != name || !ra.GetAutoHostRewrite().GetValue() ||
			rp.GetRetryOn() != "connect-failure,reset,5xx,retriable-status-codes" || rp.GetNumRetries().GetValue() != 2 ||
			len(rp.GetRetriableStatusCodes()) != 1 || rp.GetRateLimitedRetryBackOff() == nil ||
			rp.GetRetryPriority().GetName() != "envoy.retry_priorities.previous_priorities" || rp.GetPerTryTimeout().AsDuration() != 30*time.Second {
			t.Errorf("route %d: %v", i, r)
		}
		if idle := rp.GetPerTryIdleTimeout().AsDuration(); i == 0 && idle != 20*time.Second || i == 1 && idle != 0 {
			t.Errorf("route %d: per_try_idle_timeout %v", i, idle)
		}
	}
}

// Retrying only on connect failures leaves 429 alone: no retriable status
// codes and no Retry-After back-off.
func TestFallbackRetryConditions(t *testing.T) {
	cfg := fallbackConfig()
	cfg.Fallbacks[0].Retry = Retry{Retries: 5, On: []RetryCondition{RetryConnect}}
	b, err := Bootstrap(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var r *routev3.Route
	for _, rt := range hcmOf(t, b).GetRouteConfig().GetVirtualHosts()[0].GetRoutes() {
		if rt.GetName() == ModelCluster("GPT/4o") {
			r = rt
		}
	}
	rp := r.GetRoute().GetRetryPolicy()
	if rp.GetRetryOn() != "connect-failure" || rp.GetNumRetries().GetValue() != 5 || rp.GetRetriableStatusCodes() != nil || rp.GetRateLimitedRetryBackOff() != nil {
		t.Errorf("retry policy %v", rp)
	}
}

func TestFallbackErrors(t *testing.T) {
	for name, tc := range map[string]struct {
		edit func(*Config)
		want string
	}{
		"unknown backend": {func(c *Config) { c.Fallbacks[0].Deployments[1].Backend = "antropic" }, `unknown backend "antropic"`},
		"backend twice":   {func(c *Config) { c.Fallbacks[0].Deployments[1].Backend = "openai" }, `backend "openai" twice`},
		"no deployments":  {func(c *Config) { c.Fallbacks[0].Deployments = nil }, "no deployments"},
		"condition":       {func(c *Config) { c.Fallbacks[0].Retry.On = []RetryCondition{"timeout"} }, `unknown retry condition "timeout"`},
		"budget":          {func(c *Config) { c.Fallbacks[0].Retry.BudgetPercent = 120 }, "retry budget"},
		"same cluster": {func(c *Config) {
			c.Fallbacks = append(c.Fallbacks, Fallback{Model: "gpt 4o", Deployments: []Deployment{{Backend: "openai"}}})
		}, "is also model"},
	} {
		cfg := fallbackConfig()
		tc.edit(&cfg)
		if _, err := Bootstrap(cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", name, err, tc.want)
		}
	}
}
