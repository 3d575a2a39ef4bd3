package envoy

import (
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"modelgate/envoy/routing"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"github.com/google/go-cmp/cmp"
)

func TestBootstrapRejects(t *testing.T) {
	t.Parallel()
	backend := func(name, url string) []routing.Backend { return []routing.Backend{{Name: name, BaseURL: url}} }
	tests := []struct {
		name   string
		edit   func(*Config)
		wantIn []string // each must appear in the error
	}{
		{"duplicate backend", func(c *Config) {
			c.Routing.Backends = []routing.Backend{{Name: "a", BaseURL: "http://x"}, {Name: "a", BaseURL: "http://y"}}
		}, []string{`backends[1] "a": duplicate backend name`}},
		{"unparseable URL", func(c *Config) { c.Routing.Backends = backend("a", "http://[::1") }, []string{`backends[0] "a": parsing base URL`}},
		{"unsupported scheme", func(c *Config) { c.Routing.Backends = backend("a", "ftp://x") }, []string{"scheme must be http or https"}},
		{"no scheme", func(c *Config) { c.Routing.Backends = backend("a", "api.openai.com") }, []string{"scheme must be http or https"}},
		{"no host", func(c *Config) { c.Routing.Backends = backend("a", "http://") }, []string{"has no host"}},
		{"user info", func(c *Config) { c.Routing.Backends = backend("a", "https://k:s@x") }, []string{"user info"}},
		{"query", func(c *Config) { c.Routing.Backends = backend("a", "https://x/?a=1") }, []string{"a query"}},
		{"port 0", func(c *Config) { c.Routing.Backends = backend("a", "http://x:0") }, []string{"port must be 1-65535"}},
		{"port 70000", func(c *Config) { c.Routing.Backends = backend("a", "http://x:70000") }, []string{"port must be 1-65535"}},
		{"upper-case name", func(c *Config) { c.Routing.Backends = backend("OpenAI", "http://x") }, []string{`"OpenAI": name must be`}},
		{"name with a space", func(c *Config) { c.Routing.Backends = backend("a b", "http://x") }, []string{"name must be"}},
		{"name with a colon", func(c *Config) { c.Routing.Backends = backend("a:b", "http://x") }, []string{"name must be"}},
		{"name starting with a dash", func(c *Config) { c.Routing.Backends = backend("-a", "http://x") }, []string{"name must be"}},
		{"empty name", func(c *Config) { c.Routing.Backends = backend("", "http://x") }, []string{"name must be"}},
		{"64-character name", func(c *Config) { c.Routing.Backends = backend(strings.Repeat("a", 64), "http://x") }, []string{"name must be"}},
		{"ext_proc cluster name", func(c *Config) { c.Routing.Backends = backend("modelgate_extproc", "http://x") }, []string{"reserved for the ext_proc cluster"}},
		{"no ext_proc address", func(c *Config) { c.ExtProcAddress = "" }, []string{"ext_proc address (required)"}},
		{"ext_proc address without port", func(c *Config) { c.ExtProcAddress = "modelgate" }, []string{"ext_proc address", "missing port"}},
		{"ext_proc port 0", func(c *Config) { c.ExtProcAddress = "modelgate:0" }, []string{"ext_proc address", "port must be 1-65535"}},
		{"listen hostname", func(c *Config) { c.Listen = "localhost:8080" }, []string{"listen address", "IP address"}},
		{"listen without host", func(c *Config) { c.Listen = ":8080" }, []string{"listen address", "has no host"}},
		{"message timeout over 1h", func(c *Config) { c.MessageTimeout = 2 * time.Hour }, []string{"message timeout 2h0m0s"}},
		{"negative message timeout", func(c *Config) { c.MessageTimeout = -time.Second }, []string{"message timeout -1s"}},
		{"negative idle timeout", func(c *Config) { c.StreamIdleTimeout = -time.Second }, []string{"stream idle timeout"}},
		{"x-envoy routing header", func(c *Config) { c.RoutingHeader = "x-envoy-backend" }, []string{`routing header "x-envoy-backend"`}},
		{"upper-case routing header", func(c *Config) { c.RoutingHeader = "X-Backend" }, []string{"routing header"}},
		{"pseudo-header routing header", func(c *Config) { c.RoutingHeader = ":authority" }, []string{"routing header"}},
		{"namespace with a space", func(c *Config) { c.MetadataNamespace = "io modelgate" }, []string{"metadata namespace"}},
		{"every problem at once", func(c *Config) {
			c.Listen, c.RoutingHeader = "nowhere", "x-envoy-a"
			c.Routing.Backends = []routing.Backend{{Name: "A", BaseURL: "http://x"}, {Name: "b", BaseURL: "gopher://x"}}
		}, []string{"listen address", "routing header", `backends[0] "A"`, `backends[1] "b"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := Config{ExtProcAddress: "modelgate:50051", Routing: routing.Table{Backends: backend("ok", "http://x")}}
			tt.edit(&cfg)
			b, err := Bootstrap(cfg)
			if err == nil {
				t.Fatalf("Bootstrap(%+v) = %v, want an error", cfg, b)
			}
			for _, want := range tt.wantIn {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not mention %q", err, want)
				}
			}
		})
	}
}

func TestBootstrapSettings(t *testing.T) {
	t.Parallel()
	cfg := Config{
		Listen: "127.0.0.1:0", ExtProcAddress: "127.0.0.1:50051", MessageTimeout: 1500 * time.Millisecond,
		BufferLimitBytes: 1 << 20, StreamIdleTimeout: time.Minute, RoutingHeader: "x-route",
		MetadataNamespace: "com.example.gw", CAFile: "/ca.pem",
		Routing: routing.Table{Backends: []routing.Backend{{Name: "up", BaseURL: "https://up.example"}}},
	}
	b := generate(t, cfg)
	hcm := hcmOf(t, b)
	ep := unpack(t, hcm.GetHttpFilters()[0].GetTypedConfig(), &extprocv3.ExternalProcessor{})
	up := clusterNamed(t, b, "up")
	got := []any{
		listenAddress(b), hcm.GetStreamIdleTimeout().AsDuration(), ep.GetMessageTimeout().AsDuration(),
		ep.GetMetadataOptions().GetReceivingNamespaces().GetUntyped(),
		hcm.GetRouteConfig().GetVirtualHosts()[0].GetRoutes()[0].GetMatch().GetHeaders()[0].GetName(),
		up.GetPerConnectionBufferLimitBytes().GetValue(),
		unpack(t, up.GetTransportSocket().GetTypedConfig(), &tlsv3.UpstreamTlsContext{}).GetCommonTlsContext().GetValidationContext().GetTrustedCa().GetFilename(),
	}
	want := []any{
		"127.0.0.1:0", time.Minute, 1500 * time.Millisecond, []string{"com.example.gw"}, "x-route", uint32(1 << 20), "/ca.pem",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("settings (-want +got):\n%s", diff)
	}
}

func listenAddress(b *bootstrapv3.Bootstrap) string {
	sa := b.GetStaticResources().GetListeners()[0].GetAddress().GetSocketAddress()
	return net.JoinHostPort(sa.GetAddress(), strconv.Itoa(int(sa.GetPortValue())))
}
