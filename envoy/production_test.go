package envoy

import (
	"bytes"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"modelgate/envoy/routing"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	streamv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/stream/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// production is what the production knobs put in a bootstrap, read back
// from it.
type production struct {
	Admin             string
	MaxRequests       map[string]uint32 // per cluster: max_requests = max_pending_requests = max_connections
	HealthChecked     []string          // clusters with a gRPC health check
	AccessLog         string            // the logger's name, "" for none
	UseRemoteAddress  bool
	XffNumTrustedHops uint32
}

func productionOf(t *testing.T, b *bootstrapv3.Bootstrap) production {
	t.Helper()
	sa := b.GetAdmin().GetAddress().GetSocketAddress()
	got := production{Admin: net.JoinHostPort(sa.GetAddress(), strconv.Itoa(int(sa.GetPortValue()))), MaxRequests: map[string]uint32{}}
	for _, c := range b.GetStaticResources().GetClusters() {
		th := c.GetCircuitBreakers().GetThresholds()
		if len(th) != 1 || th[0].GetPriority() != corev3.RoutingPriority_DEFAULT || !th[0].GetTrackRemaining() {
			t.Errorf("cluster %s: circuit breakers %v, want one DEFAULT threshold tracking what remains", c.GetName(), th)
			continue
		}
		n := th[0].GetMaxRequests().GetValue()
		if th[0].GetMaxPendingRequests().GetValue() != n || th[0].GetMaxConnections().GetValue() != n {
			t.Errorf("cluster %s: thresholds %v, want max_requests, max_pending_requests and max_connections equal", c.GetName(), th[0])
		}
		got.MaxRequests[c.GetName()] = n
		for _, hc := range c.GetHealthChecks() {
			if hc.GetGrpcHealthCheck() != nil {
				got.HealthChecked = append(got.HealthChecked, c.GetName())
			}
		}
	}
	hcm := hcmOf(t, b)
	if logs := hcm.GetAccessLog(); len(logs) > 0 {
		got.AccessLog = logs[0].GetName()
	}
	got.UseRemoteAddress, got.XffNumTrustedHops = hcm.GetUseRemoteAddress().GetValue(), hcm.GetXffNumTrustedHops()
	if hcm.GetUseRemoteAddress() == nil {
		t.Error("use_remote_address is unset; the generated file should say which it is")
	}
	return got
}

// The production knobs, default and not, reach the bootstrap, which
// passes Validate and survives a YAML round trip.
func TestProductionKnobs(t *testing.T) {
	t.Parallel()
	backends := routing.Table{Backends: []routing.Backend{{Name: "openai", BaseURL: "https://api.openai.com"}, {Name: "local", BaseURL: "http://127.0.0.1:11434"}}}
	tests := []struct {
		name string
		cfg  Config
		want production
	}{
		{"defaults", Config{ExtProcAddress: "modelgate:50051", Routing: backends}, production{
			Admin:         "127.0.0.1:9901",
			MaxRequests:   map[string]uint32{ExtProcCluster: 100000, "openai": 100000, "local": 100000},
			HealthChecked: []string{ExtProcCluster}, AccessLog: "envoy.access_loggers.stdout",
		}},
		{"every knob set", Config{
			ExtProcAddress: "10.0.0.7:50051", Routing: backends, AdminListen: "0.0.0.0:19000", MaxRequests: 5000,
			AccessLog: AccessLogStderr, UseRemoteAddress: true, XffNumTrustedHops: 2,
		}, production{
			Admin:         "0.0.0.0:19000",
			MaxRequests:   map[string]uint32{ExtProcCluster: 5000, "openai": 5000, "local": 5000},
			HealthChecked: []string{ExtProcCluster}, AccessLog: "envoy.access_loggers.stderr", UseRemoteAddress: true, XffNumTrustedHops: 2,
		}},
		{"no access log, trusted hops without use_remote_address, IPv6 admin", Config{
			ExtProcAddress: "[::1]:50051", AdminListen: "[::1]:9901", AccessLog: AccessLogNone, XffNumTrustedHops: 1,
		}, production{
			Admin: "[::1]:9901", MaxRequests: map[string]uint32{ExtProcCluster: 100000}, HealthChecked: []string{ExtProcCluster},
			XffNumTrustedHops: 1,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := generate(t, tt.cfg)
			if err := Validate(b); err != nil {
				t.Fatalf("Validate: %v", err)
			}
			got := productionOf(t, b)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("production knobs (-want +got):\n%s", diff)
			}
			y, err := MarshalYAML(b)
			if err != nil {
				t.Fatal(err)
			}
			loaded, err := LoadYAML(y)
			if err != nil {
				t.Fatalf("LoadYAML(generated): %v", err)
			}
			if diff := cmp.Diff(b, loaded, protocmp.Transform()); diff != "" {
				t.Errorf("round trip (-generated +loaded):\n%s", diff)
			}
		})
	}
}

// The ext_proc server's health check asks the gRPC health service for the
// server as a whole (service ""), which is what it answers for.
func TestExtProcHealthCheck(t *testing.T) {
	t.Parallel()
	c := clusterNamed(t, generate(t, testConfig), ExtProcCluster)
	want := []*corev3.HealthCheck{{
		Timeout: durationpb.New(time.Second), Interval: durationpb.New(5 * time.Second),
		NoTrafficInterval:  durationpb.New(5 * time.Second),
		UnhealthyThreshold: wrapperspb.UInt32(2), HealthyThreshold: wrapperspb.UInt32(1),
		HealthChecker: &corev3.HealthCheck_GrpcHealthCheck_{GrpcHealthCheck: &corev3.HealthCheck_GrpcHealthCheck{}},
	}}
	if diff := cmp.Diff(want, c.GetHealthChecks(), protocmp.Transform()); diff != "" {
		t.Errorf("health checks (-want +got):\n%s", diff)
	}
	if c.GetCommonLbConfig() != nil {
		t.Errorf("common_lb_config = %v; the panic threshold stays Envoy's, so a lone server is never shut out", c.GetCommonLbConfig())
	}
}

// The access log is one JSON object a line, with the usage the ext_proc
// server reports in the configured metadata namespace.
func TestAccessLogFormat(t *testing.T) {
	t.Parallel()
	for _, ns := range []string{"", "com.example.gw"} {
		cfg := testConfig
		cfg.MetadataNamespace = ns
		logs := hcmOf(t, generate(t, cfg)).GetAccessLog()
		if len(logs) != 1 || logs[0].GetFilter() != nil {
			t.Fatalf("access_log = %v, want one logger for every request", logs)
		}
		format := unpack(t, logs[0].GetTypedConfig(), &streamv3.StdoutAccessLog{}).GetLogFormat()
		if format.GetJsonFormat() == nil || format.GetOmitEmptyValues() {
			t.Fatalf("log_format = %v, want json_format with nulls kept", format)
		}
		if ns == "" {
			ns = "io.modelgate"
		}
		got := map[string]string{}
		for k, v := range format.GetJsonFormat().GetFields() {
			got[k] = v.GetStringValue()
		}
		want := map[string]string{}
		for k, v := range AccessLogFields {
			want[k] = v
		}
		for _, k := range UsageKeys {
			want[k] = "%DYNAMIC_METADATA(" + ns + ":" + k + ")%"
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: fields (-want +got):\n%s", ns, diff)
		}
		for _, k := range []string{"status", "response_flags", "duration_ms", "request_id", "model", "backend", "prompt_tokens", "completion_tokens", "total_tokens"} {
			if got[k] == "" {
				t.Errorf("the access log lacks %s", k)
			}
		}
	}
}

func TestProductionKnobsRejected(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		edit   func(*Config)
		wantIn string
	}{
		{"admin on a hostname", func(c *Config) { c.AdminListen = "localhost:9901" }, `admin address "localhost:9901": Envoy's admin interface needs an IP address`},
		{"admin without a port", func(c *Config) { c.AdminListen = "127.0.0.1" }, "admin address: address 127.0.0.1: missing port"},
		{"admin port 70000", func(c *Config) { c.AdminListen = "127.0.0.1:70000" }, "admin address"},
		{"admin on the listener's port", func(c *Config) { c.AdminListen = "127.0.0.1:8080" }, `takes the port of the listener "0.0.0.0:8080"`},
		{"access log to a file", func(c *Config) { c.AccessLog = "/var/log/envoy.log" }, `access log "/var/log/envoy.log": must be stdout, stderr or none`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := Config{ExtProcAddress: "modelgate:50051"}
			tt.edit(&cfg)
			if _, err := Bootstrap(cfg); err == nil || !strings.Contains(err.Error(), tt.wantIn) {
				t.Errorf("Bootstrap error = %v, want one containing %q", err, tt.wantIn)
			}
		})
	}
	// Port 0 (any free port) and distinct addresses on one port are fine.
	for _, c := range []Config{
		{ExtProcAddress: "127.0.0.1:1", Listen: "127.0.0.1:0", AdminListen: "127.0.0.1:0"},
		{ExtProcAddress: "127.0.0.1:1", Listen: "10.0.0.1:8080", AdminListen: "127.0.0.1:8080"},
	} {
		if _, err := Bootstrap(c); err != nil {
			t.Errorf("Bootstrap(listen %s, admin %s): %v", c.Listen, c.AdminListen, err)
		}
	}
}

// What Envoy would refuse in the new parts of a hand-edited bootstrap.
func TestValidateCatchesProductionMistakes(t *testing.T) {
	t.Parallel()
	generated, err := MarshalYAML(generate(t, testConfig))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name              string
		edit              func(string) string
		wantPath, wantMsg string
	}{
		{"admin on a hostname", replace("address: 127.0.0.1\n      port_value: 9901", "address: localhost\n      port_value: 9901"),
			"admin.address.socket_address.address", `not "localhost"`},
		{"admin on the listener's port", replace("port_value: 9901", "port_value: 8080"),
			"admin.address.socket_address.port_value", "taken by static_resources.listeners[0]"},
		{"health check timeout 0s", replace("      timeout: 1s", "      timeout: 0s"),
			"static_resources.clusters[0].health_checks[0].timeout", "greater than 0s"},
		{"health check without thresholds", replace("      unhealthy_threshold: 2\n", ""),
			"static_resources.clusters[0].health_checks[0].unhealthy_threshold", "required"},
		{"gRPC health check on an HTTP/1 cluster", replace("http2_protocol_options: {}", "http_protocol_options: {}"),
			"static_resources.clusters[0].health_checks[0].grpc_health_check", "need cluster \"modelgate_extproc\" to speak HTTP/2"},
		{"unknown circuit breaker priority", replace("      - max_connections: 100000", "      - priority: URGENT\n        max_connections: 100000"),
			"", "URGENT"},
		{"misspelt threshold", replace("max_pending_requests: 100000", "max_pending_request: 100000"), "", `unknown field "max_pending_request"`},
		{"json_format value not a string", replace(`status: '%RESPONSE_CODE%'`, `status: 200`), "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			y := tt.edit(string(generated))
			if y == string(generated) {
				t.Fatal("the edit changed nothing: the generated YAML no longer has its anchor")
			}
			_, err := LoadYAML([]byte(y))
			switch {
			case tt.wantMsg == "" && tt.wantPath == "":
				// Envoy takes any JSON value in a json_format; so does Validate.
				if err != nil {
					t.Errorf("LoadYAML: %v", err)
				}
			case err == nil:
				t.Fatalf("LoadYAML accepted:\n%s", y)
			case tt.wantPath == "":
				if !strings.Contains(err.Error(), tt.wantMsg) {
					t.Errorf("error %q, want one mentioning %q", err, tt.wantMsg)
				}
			case !hasProblem(err, tt.wantPath, tt.wantMsg):
				t.Errorf("error %q, want a problem at %s mentioning %q", err, tt.wantPath, tt.wantMsg)
			}
		})
	}
}

// The generated YAML spells the knobs as Envoy's docs do.
func TestProductionYAML(t *testing.T) {
	t.Parallel()
	y, err := MarshalYAML(generate(t, Config{ExtProcAddress: "modelgate:50051", UseRemoteAddress: true, XffNumTrustedHops: 1}))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"\nadmin:\n  address:\n    socket_address:\n      address: 127.0.0.1\n      port_value: 9901\n",
		"    - grpc_health_check: {}\n",
		"name: envoy.access_loggers.stdout",
		"'@type': type.googleapis.com/envoy.extensions.access_loggers.stream.v3.StdoutAccessLog",
		"prompt_tokens: '%DYNAMIC_METADATA(io.modelgate:prompt_tokens)%'",
		"use_remote_address: true\n",
		"xff_num_trusted_hops: 1\n",
	} {
		if !bytes.Contains(y, []byte(want)) {
			t.Errorf("YAML lacks %q:\n%s", want, y)
		}
	}
}
