package envoy

import (
	"strings"
	"testing"

	"modelgate/envoy/routing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
)

// wantTLS is the UpstreamTlsContext an https backend must get.
func wantTLS(sni string, san tlsv3.SubjectAltNameMatcher_SanType, host string) *tlsv3.UpstreamTlsContext {
	return &tlsv3.UpstreamTlsContext{
		Sni: sni,
		CommonTlsContext: &tlsv3.CommonTlsContext{ValidationContextType: &tlsv3.CommonTlsContext_ValidationContext{
			ValidationContext: &tlsv3.CertificateValidationContext{
				TrustedCa: &corev3.DataSource{Specifier: &corev3.DataSource_Filename{Filename: "/etc/ssl/certs/ca-certificates.crt"}},
				MatchTypedSubjectAltNames: []*tlsv3.SubjectAltNameMatcher{{
					SanType: san,
					Matcher: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: host}},
				}},
			},
		}},
	}
}

func TestBackendCluster(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, baseURL    string
		wantType         clusterv3.Cluster_DiscoveryType
		wantHost         string
		wantPort         uint32
		wantHostRewrite  string
		wantTLS          *tlsv3.UpstreamTlsContext // nil: plain HTTP
		wantDNSPreferred bool
	}{
		{"https hostname", "https://api.openai.com", clusterv3.Cluster_LOGICAL_DNS, "api.openai.com", 443,
			"api.openai.com", wantTLS("api.openai.com", tlsv3.SubjectAltNameMatcher_DNS, "api.openai.com"), true},
		{"https with a path", "https://api.groq.com/openai", clusterv3.Cluster_LOGICAL_DNS, "api.groq.com", 443,
			"api.groq.com", wantTLS("api.groq.com", tlsv3.SubjectAltNameMatcher_DNS, "api.groq.com"), true},
		{"https on another port", "https://llm.internal:8443/", clusterv3.Cluster_LOGICAL_DNS, "llm.internal", 8443,
			"llm.internal:8443", wantTLS("llm.internal", tlsv3.SubjectAltNameMatcher_DNS, "llm.internal"), true},
		{"https on an IPv6 literal", "https://[2001:db8::1]", clusterv3.Cluster_STATIC, "2001:db8::1", 443,
			"[2001:db8::1]", wantTLS("", tlsv3.SubjectAltNameMatcher_IP_ADDRESS, "2001:db8::1"), false},
		{"http hostname", "http://mockprovider", clusterv3.Cluster_LOGICAL_DNS, "mockprovider", 80,
			"mockprovider", nil, true},
		{"http on port 443", "http://mockprovider:443", clusterv3.Cluster_LOGICAL_DNS, "mockprovider", 443,
			"mockprovider:443", nil, true},
		{"http IP with port", "http://127.0.0.1:11434", clusterv3.Cluster_STATIC, "127.0.0.1", 11434,
			"127.0.0.1:11434", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := generate(t, Config{ExtProcAddress: "127.0.0.1:50051", Routing: routing.Table{Backends: []routing.Backend{{Name: "up", BaseURL: tt.baseURL}}}})
			c := clusterNamed(t, b, "up")
			if c.GetType() != tt.wantType || (c.GetDnsLookupFamily() == clusterv3.Cluster_V4_PREFERRED) != tt.wantDNSPreferred {
				t.Errorf("type %v, dns_lookup_family %v; want %v, V4_PREFERRED %v", c.GetType(), c.GetDnsLookupFamily(), tt.wantType, tt.wantDNSPreferred)
			}
			want := &corev3.SocketAddress{Address: tt.wantHost, PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: tt.wantPort}}
			if diff := cmp.Diff(want, endpointOf(c), protocmp.Transform()); diff != "" {
				t.Errorf("endpoint (-want +got):\n%s", diff)
			}
			route := hcmOf(t, b).GetRouteConfig().GetVirtualHosts()[0].GetRoutes()[0].GetRoute()
			if got := route.GetHostRewriteLiteral(); got != tt.wantHostRewrite {
				t.Errorf("host_rewrite_literal = %q, want %q", got, tt.wantHostRewrite)
			}
			checkTransportSocket(t, c, tt.wantTLS)
		})
	}
}

func checkTransportSocket(t *testing.T, c *clusterv3.Cluster, want *tlsv3.UpstreamTlsContext) {
	t.Helper()
	ts := c.GetTransportSocket()
	if want == nil {
		if ts != nil {
			t.Errorf("http backend has transport socket %v", ts)
		}
		return
	}
	if ts.GetName() != "envoy.transport_sockets.tls" {
		t.Fatalf("transport socket = %v, want envoy.transport_sockets.tls", ts)
	}
	got := unpack(t, ts.GetTypedConfig(), &tlsv3.UpstreamTlsContext{})
	if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
		t.Errorf("UpstreamTlsContext (-want +got):\n%s", diff)
	}
}

// Every provider's public endpoint gets a TLS cluster with its own SNI
// and SAN check, and the bootstrap validates.
func TestProviderHosts(t *testing.T) {
	t.Parallel()
	hosts := map[string]string{
		"openai": "https://api.openai.com", "anthropic": "https://api.anthropic.com",
		"bedrock": "https://bedrock-runtime.us-east-1.amazonaws.com", "gemini": "https://generativelanguage.googleapis.com",
		"vertex": "https://us-east5-aiplatform.googleapis.com", "azure": "https://my-resource.openai.azure.com",
		"cohere": "https://api.cohere.com", "mistral": "https://api.mistral.ai", "groq": "https://api.groq.com/openai",
		"deepseek": "https://api.deepseek.com", "xai": "https://api.x.ai", "together": "https://api.together.xyz",
	}
	cfg := Config{ExtProcAddress: "modelgate:50051"}
	for name, u := range hosts {
		cfg.Routing.Backends = append(cfg.Routing.Backends, routing.Backend{Name: name, BaseURL: u})
	}
	b := generate(t, cfg)
	y, err := MarshalYAML(b)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := LoadYAML(y); err != nil {
		t.Fatalf("LoadYAML: %v", err)
	}
	for name, u := range hosts {
		host, _, _ := strings.Cut(strings.TrimPrefix(u, "https://"), "/")
		checkTransportSocket(t, clusterNamed(t, b, name), wantTLS(host, tlsv3.SubjectAltNameMatcher_DNS, host))
	}
}
