package envoy

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
)

var testConfig = Config{
	Listen:         "0.0.0.0:8080",
	ExtProcAddress: "modelgate:50051",
	Backends: []Backend{
		{Name: "openai-main", BaseURL: "https://api.openai.com"},
		{Name: "local", BaseURL: "http://127.0.0.1:11434"},
	},
}

func generate(t *testing.T) *bootstrapv3.Bootstrap {
	t.Helper()
	b, err := Bootstrap(testConfig)
	if err != nil {
		t.Fatalf("Bootstrap: %v", err)
	}
	return b
}

func TestRoundTrip(t *testing.T) {
	b := generate(t)
	y, err := MarshalYAML(b)
	if err != nil {
		t.Fatal(err)
	}
	got, err := LoadYAML(y)
	if err != nil {
		t.Fatalf("LoadYAML(generated): %v\n%s", err, y)
	}
	if diff := cmp.Diff(b, got, protocmp.Transform()); diff != "" {
		t.Errorf("round trip (-generated +loaded):\n%s", diff)
	}
	again, _ := MarshalYAML(got)
	if string(again) != string(y) {
		t.Error("MarshalYAML is not deterministic")
	}
}

func hcmOf(t *testing.T, b *bootstrapv3.Bootstrap) *hcmv3.HttpConnectionManager {
	t.Helper()
	hcm := &hcmv3.HttpConnectionManager{}
	if err := b.StaticResources.Listeners[0].FilterChains[0].Filters[0].GetTypedConfig().UnmarshalTo(hcm); err != nil {
		t.Fatal(err)
	}
	return hcm
}

func TestGeneratedSemantics(t *testing.T) {
	b := generate(t)
	hcm := hcmOf(t, b)
	if names := []string{hcm.HttpFilters[0].Name, hcm.HttpFilters[1].Name}; names[0] != "envoy.filters.http.ext_proc" || names[1] != "envoy.filters.http.router" {
		t.Errorf("filters = %v, want ext_proc then router", names)
	}
	ep := &extprocv3.ExternalProcessor{}
	if err := hcm.HttpFilters[0].GetTypedConfig().UnmarshalTo(ep); err != nil {
		t.Fatal(err)
	}
	pm := ep.ProcessingMode
	if pm.RequestBodyMode != extprocv3.ProcessingMode_BUFFERED || pm.ResponseBodyMode != extprocv3.ProcessingMode_BUFFERED ||
		pm.RequestTrailerMode != extprocv3.ProcessingMode_SKIP || !ep.AllowModeOverride || ep.FailureModeAllow ||
		ep.MessageTimeout.AsDuration().Seconds() != 10 {
		t.Errorf("ext_proc config = %v", ep)
	}
	routes := hcm.GetRouteConfig().VirtualHosts[0].Routes
	for _, r := range routes[:2] {
		if r.GetRoute().GetTimeout().AsDuration() != 0 {
			t.Errorf("route %s has a timeout; streams need none", r.Name)
		}
	}
	if host := routes[1].GetRoute().GetHostRewriteLiteral(); host != "127.0.0.1:11434" {
		t.Errorf("host rewrite = %q", host)
	}
	last := routes[len(routes)-1]
	var body struct {
		Error struct{ Message, Type, Code string }
	}
	if err := json.Unmarshal([]byte(last.GetDirectResponse().GetBody().GetInlineString()), &body); err != nil ||
		last.GetDirectResponse().Status != 404 || body.Error.Code != "unknown_url" || len(last.Match.Headers) != 0 {
		t.Errorf("last route = %v (%v), want a JSON 404 catch-all", last, err)
	}
	clusters := b.StaticResources.Clusters
	tlsCtx := &tlsv3.UpstreamTlsContext{}
	if err := clusters[1].TransportSocket.GetTypedConfig().UnmarshalTo(tlsCtx); err != nil {
		t.Fatalf("https backend without TLS: %v", err)
	}
	if tlsCtx.Sni != "api.openai.com" || tlsCtx.CommonTlsContext.GetValidationContext().GetTrustedCa().GetFilename() == "" {
		t.Errorf("TLS = %v, want SNI and a trusted CA", tlsCtx)
	}
	if clusters[2].TransportSocket != nil {
		t.Errorf("http backend has a transport socket")
	}
}

func TestBootstrapRejectsBadBackends(t *testing.T) {
	for name, backends := range map[string][]Backend{
		"duplicate":      {{Name: "a", BaseURL: "http://x"}, {Name: "a", BaseURL: "http://y"}},
		"bad scheme":     {{Name: "a", BaseURL: "ftp://x"}},
		"bad name":       {{Name: "A B", BaseURL: "http://x"}},
		"reserved name":  {{Name: ExtProcCluster, BaseURL: "http://x"}},
		"no host":        {{Name: "a", BaseURL: "http://"}},
		"port not a num": {{Name: "a", BaseURL: "http://x:0"}},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := testConfig
			cfg.Backends = backends
			if _, err := Bootstrap(cfg); err == nil {
				t.Error("Bootstrap accepted it")
			}
		})
	}
}

// mutate applies a text replacement to the generated YAML and expects
// LoadYAML to fail with a message containing want.
func TestLoadYAMLCatches(t *testing.T) {
	y, err := MarshalYAML(generate(t))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct{ name, old, new, want string }{
		{"misspelled top-level field", "connect_timeout: 1s", "conect_timeout: 1s", "unknown field"},
		{"misspelled field in typed_config", "stat_prefix: modelgate", "stat_prefx: modelgate", "unknown field"},
		{"misspelled nested Any field", "allow_mode_override: true", "allow_mode_overide: true", "unknown field"},
		{"unknown enum", "response_body_mode: BUFFERED", "response_body_mode: STREAMING", "STREAMING"},
		{"unregistered @type", "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router", "type.googleapis.com/envoy.extensions.filters.http.nope.v3.Nope", "unable to resolve"},
		{"port out of range", "port_value: 8080", "port_value: 70000", "PortValue"},
		{"message_timeout inside Any", "message_timeout: 10s", "message_timeout: 7200s", "MessageTimeout"},
		{"empty stat_prefix", "stat_prefix: modelgate", `stat_prefix: ""`, "StatPrefix"},
		{"route to missing cluster", "cluster: local\n", "cluster: missing\n", "unknown cluster"},
		{"ext_proc cluster without HTTP/2", "http2_protocol_options: {}", "http_protocol_options: {}", "HTTP/2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !strings.Contains(string(y), tt.old) {
				t.Fatalf("generated YAML has no %q", tt.old)
			}
			_, err := LoadYAML([]byte(strings.Replace(string(y), tt.old, tt.new, 1)))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("LoadYAML error = %v, want one mentioning %q", err, tt.want)
			}
		})
	}
}

// Every Envoy bootstrap in the repository validates.
func TestRepositoryEnvoyYAML(t *testing.T) {
	found := 0
	for _, dir := range []string{".", "../deploy"} {
		filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !(strings.HasSuffix(path, ".yaml") || strings.HasSuffix(path, ".yml")) {
				return nil
			}
			data, err := os.ReadFile(path)
			if err != nil || !strings.Contains(string(data), "static_resources:") {
				return nil
			}
			found++
			if _, err := LoadYAML(data); err != nil {
				t.Errorf("%s: %v", path, err)
			}
			return nil
		})
	}
	if found == 0 {
		t.Error("no Envoy bootstrap found; want at least envoy/envoy.yaml")
	}
}

// Every provider's public endpoint gets a TLS cluster with its own SNI
// and SAN check, and the bootstrap validates.
func TestProviderHosts(t *testing.T) {
	hosts := map[string]string{
		"openai": "https://api.openai.com", "anthropic": "https://api.anthropic.com",
		"bedrock": "https://bedrock-runtime.us-east-1.amazonaws.com", "gemini": "https://generativelanguage.googleapis.com",
		"vertex": "https://us-east5-aiplatform.googleapis.com", "azure": "https://my-resource.openai.azure.com",
		"cohere": "https://api.cohere.com", "mistral": "https://api.mistral.ai", "groq": "https://api.groq.com/openai",
		"deepseek": "https://api.deepseek.com", "xai": "https://api.x.ai", "together": "https://api.together.xyz",
	}
	cfg := Config{ExtProcAddress: "modelgate:50051"}
	for name, u := range hosts {
		cfg.Backends = append(cfg.Backends, Backend{Name: name, BaseURL: u})
	}
	b, err := Bootstrap(cfg)
	if err != nil {
		t.Fatal(err)
	}
	y, _ := MarshalYAML(b)
	if _, err := LoadYAML(y); err != nil {
		t.Fatalf("LoadYAML: %v", err)
	}
	for _, c := range b.StaticResources.Clusters[1:] {
		tlsCtx := &tlsv3.UpstreamTlsContext{}
		if err := c.TransportSocket.GetTypedConfig().UnmarshalTo(tlsCtx); err != nil {
			t.Fatalf("%s: no TLS: %v", c.Name, err)
		}
		want := strings.TrimPrefix(hosts[c.Name], "https://")
		want, _, _ = strings.Cut(want, "/")
		san := tlsCtx.CommonTlsContext.GetValidationContext().GetMatchTypedSubjectAltNames()
		if tlsCtx.Sni != want || len(san) != 1 || san[0].Matcher.GetExact() != want {
			t.Errorf("%s: SNI %q, SAN %v; want %q", c.Name, tlsCtx.Sni, san, want)
		}
	}
}
