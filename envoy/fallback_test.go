package envoy

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"modelgate/envoy/routing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	upstreamsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
)

func fallbackConfig() Config {
	return Config{ExtProcAddress: "127.0.0.1:50051", Routing: routing.Table{
		Backends: []routing.Backend{
			{Name: "openai", BaseURL: "https://api.openai.com", Timeouts: routing.Timeouts{ResponseHeaders: time.Minute}},
			{Name: "anthropic", BaseURL: "https://api.anthropic.com"},
			{Name: "local", BaseURL: "http://127.0.0.1:9000"},
		},
		Models: []routing.Model{{
			ID:          "GPT/4o",
			Deployments: []routing.Deployment{{Backend: "openai"}, {Backend: "anthropic", Priority: 1}, {Backend: "local", Priority: 1, Weight: 3}},
			Timeouts:    routing.Timeouts{ResponseHeaders: 30 * time.Second, StreamIdle: 20 * time.Second},
			Fallback:    &routing.Fallback{},
		}},
	}}
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
			md[routing.MetadataNamespace].GetFields()[BackendMetadataKey].GetStringValue() != w.backend ||
			(md[transportSocketMatchKey] != nil) != w.tls {
			t.Errorf("endpoint %d: priority %d, %v", i, eps[i].GetPriority(), ep)
		}
	}
	if len(c.GetTransportSocketMatches()) != 2 {
		t.Errorf("transport socket matches %v, want one per https deployment", c.GetTransportSocketMatches())
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
		if r.GetMatch().GetHeaders()[0].GetName() != routing.ModelHeader || ra.GetCluster() != name || !ra.GetAutoHostRewrite().GetValue() ||
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
	cfg.Routing.Models[0].Fallback = &routing.Fallback{Retries: 5, RetryOn: []routing.RetryCondition{routing.RetryConnect}}
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
		"unknown backend": {func(c *Config) { c.Routing.Models[0].Deployments[1].Backend = "antropic" }, `unknown backend "antropic"`},
		"backend twice":   {func(c *Config) { c.Routing.Models[0].Deployments[1].Backend = "openai" }, `backend "openai" twice`},
		"no deployments":  {func(c *Config) { c.Routing.Models[0].Deployments = nil }, "no deployments"},
		"condition":       {func(c *Config) { c.Routing.Models[0].Fallback.RetryOn = []routing.RetryCondition{"timeout"} }, `unknown retry condition "timeout"`},
		"budget":          {func(c *Config) { c.Routing.Models[0].Fallback.BudgetPercent = 120 }, "retry budget"},
		"same cluster": {func(c *Config) {
			c.Routing.Models = append(c.Routing.Models, routing.Model{ID: "gpt 4o", Deployments: []routing.Deployment{{Backend: "openai"}}, Fallback: &routing.Fallback{}})
		}, "is also model"},
		"negative priority": {func(c *Config) { c.Routing.Models[0].Deployments[1].Priority = -1 },
			`models[0] "GPT/4o": deployments[1] (backend "anthropic"): priority -1 is not 0 to 4294967295`},
		"negative weight": {func(c *Config) { c.Routing.Models[0].Deployments[2].Weight = -3 },
			`models[0] "GPT/4o": deployments[2] (backend "local"): weight -3 is not 0 to 4294967295`},
		"weight over uint32": {func(c *Config) { c.Routing.Models[0].Deployments[2].Weight = math.MaxUint32 + 1 },
			`models[0] "GPT/4o": deployments[2] (backend "local"): weight 4294967296 is not 0 to 4294967295`},
		"negative retries": {func(c *Config) { c.Routing.Models[0].Fallback.Retries = -1 },
			`models[0] "GPT/4o": fallback retries -1 is not 0 to 4294967295`},
		"negative consecutive": {func(c *Config) { c.Routing.Models[0].Fallback.Outlier.Consecutive = -2 },
			`models[0] "GPT/4o": fallback outlier consecutive -2 is not 0 to 4294967295`},
		"negative max retry after": {func(c *Config) { c.Routing.Models[0].Fallback.MaxRetryAfter = -time.Second },
			`models[0] "GPT/4o": fallback max retry after -1s is negative`},
		"model id with a newline": {func(c *Config) { c.Routing.Models[0].ID = "gpt\n4o" }, "control characters"},
		"unknown backend without fallback": {func(c *Config) {
			c.Routing.Models = append(c.Routing.Models, routing.Model{ID: "plain", Deployments: []routing.Deployment{{Backend: "local"}, {Backend: "gone"}}})
		}, `models[1] "plain": deployments[1]: unknown backend "gone"`},
	} {
		cfg := fallbackConfig()
		tc.edit(&cfg)
		if _, err := Bootstrap(cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", name, err, tc.want)
		}
	}
}

// A deployment on https://host:8443 is verified as host: the SNI and the
// SAN are the bare host name, as its backend's own cluster has them, while
// the endpoint's hostname, which auto_host_rewrite sends as Host, keeps
// the port. (auto_host_sni would send the hostname verbatim, port and all,
// and auto_sni_san_validation would then want a SAN "host:8443": Envoy's
// client_context_impl.cc and default_validator.cc.)
func TestFallbackTLSNames(t *testing.T) {
	t.Parallel()
	cfg := Config{ExtProcAddress: "127.0.0.1:50051", Routing: routing.Table{
		Backends: []routing.Backend{
			{Name: "odd-port", BaseURL: "https://llm.internal.example:8443"},
			{Name: "ip", BaseURL: "https://10.1.2.3:8443"},
			{Name: "plain", BaseURL: "http://127.0.0.1:9000"},
		},
		Models: []routing.Model{{ID: "m", Fallback: &routing.Fallback{},
			Deployments: []routing.Deployment{{Backend: "odd-port"}, {Backend: "ip", Priority: 1}, {Backend: "plain", Priority: 2}}}},
	}}
	b := generate(t, cfg)
	var c *clusterv3.Cluster
	for _, cl := range b.GetStaticResources().GetClusters() {
		if cl.GetName() == ModelCluster("m") {
			c = cl
		}
	}
	if c == nil {
		t.Fatal("no model cluster")
	}
	type names struct{ hostname, sni, san, sanType string }
	got := map[string]names{}
	for _, lle := range c.GetLoadAssignment().GetEndpoints() {
		le := lle.GetLbEndpoints()[0]
		backend := le.GetMetadata().GetFilterMetadata()[routing.MetadataNamespace].GetFields()[BackendMetadataKey].GetStringValue()
		n := names{hostname: le.GetEndpoint().GetHostname()}
		label := le.GetMetadata().GetFilterMetadata()[transportSocketMatchKey]
		for _, m := range c.GetTransportSocketMatches() {
			if label == nil || !proto.Equal(m.GetMatch(), label) {
				continue
			}
			var tc tlsv3.UpstreamTlsContext
			if err := m.GetTransportSocket().GetTypedConfig().UnmarshalTo(&tc); err != nil {
				t.Fatal(err)
			}
			if tc.GetAutoHostSni() || tc.GetAutoSniSanValidation() {
				t.Errorf("%s: auto_host_sni or auto_sni_san_validation set: %v", backend, &tc)
			}
			n.sni = tc.GetSni()
			for _, san := range tc.GetCommonTlsContext().GetValidationContext().GetMatchTypedSubjectAltNames() {
				n.san, n.sanType = san.GetMatcher().GetExact(), san.GetSanType().String()
			}
			break
		}
		got[backend] = n
	}
	want := map[string]names{
		"odd-port": {hostname: "llm.internal.example:8443", sni: "llm.internal.example", san: "llm.internal.example", sanType: "DNS"},
		"ip":       {hostname: "10.1.2.3:8443", san: "10.1.2.3", sanType: "IP_ADDRESS"},
		"plain":    {hostname: "127.0.0.1:9000"},
	}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(names{})); diff != "" {
		t.Errorf("endpoint names (-want +got):\n%s", diff)
	}
}
