package standin

import (
	"bytes"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/config/accesslog/v3"
	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	streamv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/stream/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"modelgate/envoy"
	"modelgate/envoy/routing"
)

// generatedHCM is the connection manager the gateway generates for cfg.
func generatedHCM(t *testing.T, cfg envoy.Config) *hcmv3.HttpConnectionManager {
	t.Helper()
	if cfg.ExtProcAddress == "" {
		cfg.ExtProcAddress = "127.0.0.1:1"
	}
	b, err := envoy.Bootstrap(cfg)
	if err != nil {
		t.Fatal(err)
	}
	hcm := &hcmv3.HttpConnectionManager{}
	if err := b.StaticResources.Listeners[0].FilterChains[0].Filters[0].GetTypedConfig().UnmarshalTo(hcm); err != nil {
		t.Fatal(err)
	}
	return hcm
}

// The bootstrap the gateway generates, with each production knob set or
// not, is what the stand-in runs.
func TestGeneratedProductionBootstrap(t *testing.T) {
	backends := []routing.Backend{{Name: "up", BaseURL: "http://127.0.0.1:2"}}
	type want struct {
		out              *os.File // nil: no access log
		useRemoteAddress bool
		hops             uint32
		maxInFlight      map[string]int64
	}
	for _, tt := range []struct {
		name string
		cfg  envoy.Config
		want want
	}{
		{"defaults", envoy.Config{}, want{os.Stdout, false, 0, map[string]int64{"modelgate_extproc": 100000, "up": 100000}}},
		{"every knob", envoy.Config{AdminListen: "0.0.0.0:19000", MaxRequests: 3, AccessLog: envoy.AccessLogStderr,
			UseRemoteAddress: true, XffNumTrustedHops: 2},
			want{os.Stderr, true, 2, map[string]int64{"modelgate_extproc": 3, "up": 3}}},
		{"no access log", envoy.Config{AccessLog: envoy.AccessLogNone}, want{nil, false, 0, map[string]int64{"modelgate_extproc": 100000, "up": 100000}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tt.cfg.ExtProcAddress, tt.cfg.Routing.Backends = "127.0.0.1:1", backends
			b, err := envoy.Bootstrap(tt.cfg)
			if err != nil {
				t.Fatal(err)
			}
			p, err := New(b)
			if err != nil {
				t.Fatalf("New(generated): %v", err)
			}
			defer p.Close()
			got := want{nil, p.plan.useRemoteAddress, p.plan.xffTrustedHops, map[string]int64{}}
			if al := p.plan.accessLog; al != nil {
				got.out, _ = al.out.(*os.File)
			}
			for name, c := range p.plan.clusters {
				got.maxInFlight[name] = c.maxInFlight
			}
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(want{}), cmp.Comparer(func(a, b *os.File) bool { return a == b })); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
		})
	}
}

// Whatever of the new configuration the stand-in does not implement, it
// refuses.
func TestProductionConfigRefused(t *testing.T) {
	logWith := func(edit func(*streamv3.StdoutAccessLog)) func(*hcmv3.HttpConnectionManager) {
		return func(h *hcmv3.HttpConnectionManager) {
			l := &streamv3.StdoutAccessLog{}
			if err := generatedHCM(t, envoy.Config{}).GetAccessLog()[0].GetTypedConfig().UnmarshalTo(l); err != nil {
				t.Fatal(err)
			}
			edit(l)
			h.AccessLog = []*accesslogv3.AccessLog{{Name: "envoy.access_loggers.stdout",
				ConfigType: &accesslogv3.AccessLog_TypedConfig{TypedConfig: mustAny(t, l)}}}
		}
	}
	field := func(k, v string) func(*streamv3.StdoutAccessLog) {
		return func(l *streamv3.StdoutAccessLog) {
			l.GetLogFormat().GetJsonFormat().Fields[k] = structpb.NewStringValue(v)
		}
	}
	tests := map[string]setup{
		"internal_address_config for unix sockets": withHCM(func(h *hcmv3.HttpConnectionManager) {
			h.InternalAddressConfig = &hcmv3.HttpConnectionManager_InternalAddressConfig{UnixSockets: true}
		}),
		"generate_request_id off": withHCM(func(h *hcmv3.HttpConnectionManager) { h.GenerateRequestId = wrapperspb.Bool(false) }),
		"HTTP/3 codec":            withHCM(func(h *hcmv3.HttpConnectionManager) { h.CodecType = hcmv3.HttpConnectionManager_HTTP3 }),
		"two access logs": withHCM(func(h *hcmv3.HttpConnectionManager) {
			h.AccessLog = append(generatedHCM(t, envoy.Config{}).GetAccessLog(), generatedHCM(t, envoy.Config{}).GetAccessLog()...)
		}),
		"access log filter": withHCM(func(h *hcmv3.HttpConnectionManager) {
			h.AccessLog = generatedHCM(t, envoy.Config{}).GetAccessLog()
			h.AccessLog[0].Filter = &accesslogv3.AccessLogFilter{}
		}),
		"file access log": withHCM(func(h *hcmv3.HttpConnectionManager) {
			h.AccessLog = []*accesslogv3.AccessLog{{Name: "envoy.access_loggers.file",
				ConfigType: &accesslogv3.AccessLog_TypedConfig{TypedConfig: mustAny(t, &hcmv3.HttpConnectionManager{})}}}
		}),
		"text format": withHCM(logWith(func(l *streamv3.StdoutAccessLog) {
			l.GetLogFormat().Format = &corev3.SubstitutionFormatString_TextFormatSource{TextFormatSource: &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: "%RESPONSE_CODE%\n"}}}
		})),
		"omit_empty_values": withHCM(logWith(func(l *streamv3.StdoutAccessLog) { l.GetLogFormat().OmitEmptyValues = true })),
		"unknown operator":  withHCM(logWith(field("x", "%UPSTREAM_HOST%"))),
		"operator length":   withHCM(logWith(field("x", "%REQ(USER-AGENT):10%"))),
		"two operators":     withHCM(logWith(field("x", "%RESPONSE_CODE% %DURATION%"))),
		"metadata path":     withHCM(logWith(field("x", "%DYNAMIC_METADATA(io.modelgate:a:b)%"))),
		"nested object": withHCM(logWith(func(l *streamv3.StdoutAccessLog) {
			l.GetLogFormat().GetJsonFormat().Fields["x"] = structpb.NewStructValue(&structpb.Struct{})
		})),
		// Success-rate detection can act with as few hosts as its minimum.
		"success-rate outlier detection": {clusters: func(_, up *clusterv3.Cluster) {
			up.OutlierDetection = &clusterv3.OutlierDetection{SuccessRateMinimumHosts: wrapperspb.UInt32(1)}
		}},
		"locality weighted load balancing": {clusters: func(ep, _ *clusterv3.Cluster) {
			ep.CommonLbConfig = &clusterv3.Cluster_CommonLbConfig{LocalityConfigSpecifier: &clusterv3.Cluster_CommonLbConfig_LocalityWeightedLbConfig_{
				LocalityWeightedLbConfig: &clusterv3.Cluster_CommonLbConfig_LocalityWeightedLbConfig{}}}
		}},
		"health checks with a panic threshold": {clusters: func(ep, _ *clusterv3.Cluster) {
			ep.HealthChecks = []*corev3.HealthCheck{{HealthChecker: &corev3.HealthCheck_GrpcHealthCheck_{GrpcHealthCheck: &corev3.HealthCheck_GrpcHealthCheck{}}}}
			ep.CommonLbConfig = &clusterv3.Cluster_CommonLbConfig{HealthyPanicThreshold: &typev3.Percent{Value: 0}}
		}},
		"HTTP health check": {clusters: func(ep, _ *clusterv3.Cluster) {
			ep.HealthChecks = []*corev3.HealthCheck{{HealthChecker: &corev3.HealthCheck_HttpHealthCheck_{HttpHealthCheck: &corev3.HealthCheck_HttpHealthCheck{Path: "/"}}}}
		}},
		"health check event log": {clusters: func(ep, _ *clusterv3.Cluster) {
			ep.HealthChecks = []*corev3.HealthCheck{{AlwaysLogHealthCheckFailures: true,
				HealthChecker: &corev3.HealthCheck_GrpcHealthCheck_{GrpcHealthCheck: &corev3.HealthCheck_GrpcHealthCheck{}}}}
		}},
		"per-host thresholds": {clusters: func(_, up *clusterv3.Cluster) {
			up.CircuitBreakers = &clusterv3.CircuitBreakers{PerHostThresholds: []*clusterv3.CircuitBreakers_Thresholds{{}}}
		}},
	}
	for name, s := range tests {
		t.Run(name, func(t *testing.T) {
			if _, err := New(offlineBootstrap(t, s)); err == nil || !strings.Contains(err.Error(), "unsupported configuration") {
				t.Errorf("New = %v, want it refused", err)
			}
		})
	}
	for name, edit := range map[string]func(*bootstrapv3.Bootstrap){
		"node":               func(b *bootstrapv3.Bootstrap) { b.Node = &corev3.Node{Id: "x"} },
		"admin profile_path": func(b *bootstrapv3.Bootstrap) { b.Admin = &bootstrapv3.Admin{ProfilePath: "/tmp/p"} },
		"secrets":            func(b *bootstrapv3.Bootstrap) { b.StaticResources.Secrets = []*tlsv3.Secret{{Name: "s"}} },
	} {
		t.Run(name, func(t *testing.T) {
			b := offlineBootstrap(t, setup{})
			edit(b)
			if _, err := New(b); err == nil || !strings.Contains(err.Error(), "unsupported configuration") {
				t.Errorf("New = %v, want it refused", err)
			}
		})
	}
	t.Run("gRPC health check of an HTTP/1 cluster", func(t *testing.T) {
		b := offlineBootstrap(t, setup{clusters: func(_, up *clusterv3.Cluster) {
			up.HealthChecks = []*corev3.HealthCheck{{HealthChecker: &corev3.HealthCheck_GrpcHealthCheck_{GrpcHealthCheck: &corev3.HealthCheck_GrpcHealthCheck{}}}}
		}})
		if _, err := New(b); err == nil || !strings.Contains(err.Error(), "need HTTP/2") {
			t.Errorf("New = %v, want it refused", err)
		}
	})
}

// usageReply answers like the gateway's ext_proc server: the last body
// reply carries the usage as dynamic metadata.
func usageReply(req *extprocv3.ProcessingRequest) *extprocv3.ProcessingResponse {
	if req.GetResponseBody() == nil {
		return nil
	}
	md, _ := structpb.NewStruct(map[string]any{"io.modelgate": map[string]any{
		"model": "gpt-4o", "backend": "up", "prompt_tokens": 8, "completion_tokens": 377, "total_tokens": 385,
	}, "io.other": map[string]any{"model": "not received"}})
	r := defaultReply(req)
	r.DynamicMetadata = md
	return r
}

// withGeneratedAccessLog puts the gateway's access log (for cfg) in the
// test bootstrap.
func withGeneratedAccessLog(t *testing.T, cfg envoy.Config) setup {
	hcm := generatedHCM(t, cfg)
	return setup{hcm: func(h *hcmv3.HttpConnectionManager) {
		h.AccessLog, h.UseRemoteAddress, h.XffNumTrustedHops = hcm.GetAccessLog(), hcm.GetUseRemoteAddress(), hcm.GetXffNumTrustedHops()
	}}
}

func decodeLine(t *testing.T, line string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(line), &m); err != nil {
		t.Fatalf("access log line %q: %v", line, err)
	}
	return m
}

// The gateway's access log, as the stand-in writes it: typed values,
// null for what is not there, the usage from the receiving namespace.
func TestAccessLogLine(t *testing.T) {
	e := startWith(t, &stubProc{reply: usageReply}, nil, withGeneratedAccessLog(t, envoy.Config{}))
	begin := time.Now()
	r := e.do(t, "POST", "/v1/chat/completions?x=1", "hello", map[string]string{"User-Agent": "sdk/1", "X-Request-Id": "req-7"})
	en := e.entry(t)
	if r.status != 200 {
		t.Fatalf("status %d", r.status)
	}
	got := decodeLine(t, en.Line)
	start, err := time.Parse("2006-01-02T15:04:05.000Z", got["start_time"].(string))
	if err != nil || start.Before(begin.Add(-time.Second)) || start.After(time.Now()) {
		t.Errorf("start_time %v (%v)", got["start_time"], err)
	}
	if d, ok := got["duration_ms"].(float64); !ok || d < 0 || d > 5000 {
		t.Errorf("duration_ms %v", got["duration_ms"])
	}
	delete(got, "start_time")
	delete(got, "duration_ms")
	want := map[string]any{
		"method": "POST", "path": "/v1/chat/completions?x=1", "status": 200.0, "response_code_details": nil,
		"response_flags": "-", "bytes_received": 5.0, "bytes_sent": float64(len("hello from upstream")),
		"request_id": "req-7", "client_address": "127.0.0.1", "user_agent": "sdk/1", "route": "up", "upstream_cluster": "up",
		"model": "gpt-4o", "backend": "up", "provider": nil, "account_id": nil,
		"prompt_tokens": 8.0, "completion_tokens": 377.0, "total_tokens": 385.0,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("access log (-want +got):\n%s", diff)
	}

	// A local reply: its details and flags, no route, no usage.
	e = startWith(t, &stubProc{reply: requestHeadersReply(&extprocv3.CommonResponse{})}, nil, withGeneratedAccessLog(t, envoy.Config{}))
	r = e.do(t, "GET", "/", "", nil)
	en = e.entry(t)
	got = decodeLine(t, en.Line)
	if r.status != 404 || got["status"] != 404.0 || got["response_code_details"] != "direct_response" || got["response_flags"] != "-" ||
		got["route"] != "not_found" || got["upstream_cluster"] != nil || got["model"] != nil || got["prompt_tokens"] != nil {
		t.Errorf("404 logged as %s", en.Line)
	}
}

// Without WithAccessLog the line goes where the bootstrap says, one line
// a request.
func TestAccessLogOutput(t *testing.T) {
	l, up := serveStub(t, &stubProc{reply: usageReply})
	b := testBootstrap(t, l, up, withGeneratedAccessLog(t, envoy.Config{AccessLog: envoy.AccessLogStderr}))
	p, err := New(b)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if p.plan.accessLog.out != os.Stderr {
		t.Fatalf("access log output %v, want stderr", p.plan.accessLog.out)
	}
	var buf syncBuffer
	p.plan.accessLog.out = &buf
	srv := httptest.NewServer(p)
	defer srv.Close()
	var wg sync.WaitGroup
	for range 5 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if resp, err := http.Get(srv.URL + "/"); err == nil {
				resp.Body.Close()
			}
		}()
	}
	wg.Wait()
	srv.Close() // the handlers, and their log lines, are done
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != 5 {
		t.Fatalf("%d lines, want 5:\n%s", len(lines), buf.String())
	}
	for _, line := range lines {
		if m := decodeLine(t, line); m["status"] != 200.0 || m["total_tokens"] != 385.0 {
			t.Errorf("line %s", line)
		}
	}
}

// serveStub runs p and an upstream, and returns their addresses.
func serveStub(t *testing.T, p *stubProc) (extProcAddr, upAddr string) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	extprocv3.RegisterExternalProcessorServer(gs, p)
	go gs.Serve(l)
	t.Cleanup(gs.Stop)
	up := httptest.NewServer(&upstreamRecorder{})
	t.Cleanup(up.Close)
	return l.Addr().String(), up.Listener.Addr().String()
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// The connection manager's x-forwarded-for handling, on the examples of
// Envoy's docs (HTTP header manipulation, x-forwarded-for), and what an
// edge request loses.
func TestForwardedFor(t *testing.T) {
	tests := []struct {
		name                string
		useRemoteAddress    bool
		hops                uint32
		peer, xff           string
		wantClient, wantXFF string
		wantExternal        string // x-envoy-external-address; "" for none
		// wantIDKept: the client's x-request-id survives; wantInternal: the
		// request is internal (x-envoy-internal) and keeps x-envoy-retry-on,
		// which every external request loses.
		wantIDKept, wantInternal bool
		internal                 []string // internal_address_config cidr_ranges
	}{
		{"edge, no trusted proxy (example 1)", true, 0, "192.0.2.5", "203.0.113.128, 203.0.113.10, 203.0.113.1",
			"192.0.2.5", "203.0.113.128, 203.0.113.10, 203.0.113.1,192.0.2.5", "192.0.2.5", false, false, nil},
		{"internal proxy behind the edge (example 2)", false, 0, "10.11.12.13", "203.0.113.128, 203.0.113.10, 203.0.113.1, 192.0.2.5",
			"192.0.2.5", "203.0.113.128, 203.0.113.10, 203.0.113.1, 192.0.2.5", "", true, false, nil},
		{"edge behind two trusted proxies (example 3)", true, 2, "192.0.2.5", "203.0.113.128, 203.0.113.10, 203.0.113.1",
			"203.0.113.10", "203.0.113.128, 203.0.113.10, 203.0.113.1,192.0.2.5", "203.0.113.10", false, false, nil},
		{"internal proxy, two trusted hops (example 4)", false, 2, "10.11.12.13", "203.0.113.128, 203.0.113.10, 203.0.113.1, 192.0.2.5",
			"203.0.113.10", "203.0.113.128, 203.0.113.10, 203.0.113.1, 192.0.2.5", "", true, false, nil},
		{"default, no x-forwarded-for: the peer", false, 0, "198.51.100.7", "", "198.51.100.7", "", "", true, false, nil},
		{"default, a forged entry is believed", false, 0, "198.51.100.7", "1.2.3.4", "1.2.3.4", "1.2.3.4", "", true, false, nil},
		{"too few entries for the hops: the peer", true, 3, "192.0.2.5", "203.0.113.1", "192.0.2.5", "203.0.113.1,192.0.2.5", "192.0.2.5", false, false, nil},
		{"not an address: the peer", false, 0, "198.51.100.7", "unknown", "198.51.100.7", "unknown", "", true, false, nil},
		// With internal_address_config a client in its ranges is internal:
		// not an edge request, x-envoy-internal set, its x-envoy-* kept.
		{"internal peer at the edge", true, 0, "10.11.12.13", "", "10.11.12.13", "10.11.12.13", "", true, true, []string{"10.0.0.0/8"}},
		// An x-forwarded-for of one address is trusted for the check: a
		// forged entry makes the client internal.
		{"internal by a forged entry", false, 0, "198.51.100.7", "10.1.1.1", "10.1.1.1", "10.1.1.1", "", true, true, []string{"10.0.0.0/8"}},
		// Two entries are not: the request is external.
		{"two entries are never internal", false, 0, "10.11.12.13", "10.1.1.1, 10.2.2.2", "10.2.2.2", "10.1.1.1, 10.2.2.2", "", true, false, []string{"10.0.0.0/8"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "http://gw/v1/models", nil)
			r.RemoteAddr = tt.peer + ":40000"
			r.Header.Set("X-Request-Id", "client-id")
			r.Header.Set("X-Envoy-Retry-On", "5xx")
			r.Header.Set("X-Envoy-Internal", "true")
			if tt.xff != "" {
				r.Header.Set("X-Forwarded-For", tt.xff)
			}
			pl := &plan{useRemoteAddress: tt.useRemoteAddress, xffTrustedHops: tt.hops}
			for _, c := range tt.internal {
				_, n, _ := net.ParseCIDR(c)
				pl.internal = append(pl.internal, n)
			}
			x := &exchange{p: &Proxy{plan: pl}, r: r}
			h := x.requestHeaders()
			xff, _ := h.get("x-forwarded-for")
			ext, _ := h.get("x-envoy-external-address")
			id, _ := h.get("x-request-id")
			_, retry := h.get("x-envoy-retry-on")
			_, internal := h.get("x-envoy-internal")
			if x.entry.ClientAddress != tt.wantClient || xff != tt.wantXFF || ext != tt.wantExternal ||
				(id == "client-id") != tt.wantIDKept || retry != tt.wantInternal || internal != tt.wantInternal {
				t.Errorf("client %q xff %q external %q id %q x-envoy-retry-on %v x-envoy-internal %v", x.entry.ClientAddress, xff, ext, id, retry, internal)
			}
		})
	}
	t.Run("a loopback peer appends the listener's address", func(t *testing.T) {
		e := startWith(t, &stubProc{}, nil, withGeneratedAccessLog(t, envoy.Config{UseRemoteAddress: true}))
		e.do(t, "GET", "/", "", map[string]string{"X-Forwarded-For": "203.0.113.9", "X-Forwarded-Proto": "https"})
		en := e.entry(t)
		got := e.up.reqs[0].Header
		if got.Get("X-Forwarded-For") != "203.0.113.9,127.0.0.1" || got.Get("X-Forwarded-Proto") != "http" ||
			decodeLine(t, en.Line)["client_address"] != "127.0.0.1" {
			t.Errorf("upstream x-forwarded-for %q proto %q, log %s", got.Get("X-Forwarded-For"), got.Get("X-Forwarded-Proto"), en.Line)
		}
	})
	t.Run("without use_remote_address the client's x-forwarded-proto stays", func(t *testing.T) {
		e := startWith(t, &stubProc{}, nil, setup{})
		e.do(t, "GET", "/", "", map[string]string{"X-Forwarded-Proto": "https"})
		e.entry(t)
		if got := e.up.reqs[0].Header.Values("X-Forwarded-Proto"); len(got) != 1 || got[0] != "https" {
			t.Errorf("upstream x-forwarded-proto %q", got)
		}
	})
}

// The circuit breakers: past max_requests the ext_proc stream is not
// opened (a gRPC UNAVAILABLE, failing closed) and a backend request
// overflows (503, UO); a finished request frees its slot.
func TestCircuitBreakers(t *testing.T) {
	limit := func(n uint32) *clusterv3.CircuitBreakers {
		return &clusterv3.CircuitBreakers{Thresholds: []*clusterv3.CircuitBreakers_Thresholds{{MaxRequests: wrapperspb.UInt32(n)}}}
	}
	release := make(chan struct{})
	slow := &upstreamRecorder{handler: func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Slow") != "" {
			<-release
		}
		w.Write([]byte("ok"))
	}}
	for _, tt := range []struct {
		name        string
		cbs         func(ep, up *clusterv3.Cluster)
		wantStatus  int
		wantDetails string
		wantFlags   string
	}{
		{"ext_proc", func(ep, _ *clusterv3.Cluster) { ep.CircuitBreakers = limit(1) }, 500,
			"ext_proc_error_gRPC_error_14{upstream_connect_error_or_disconnect/reset_before_headers._reset_reason:_overflow}", ""},
		{"backend", func(_, up *clusterv3.Cluster) { up.CircuitBreakers = limit(1) }, 503,
			"upstream_reset_before_response_started{overflow}", "UO"},
		{"backend over HTTP/1: connections plus pending", func(_, up *clusterv3.Cluster) {
			up.CircuitBreakers = &clusterv3.CircuitBreakers{Thresholds: []*clusterv3.CircuitBreakers_Thresholds{{
				MaxConnections: wrapperspb.UInt32(1), MaxPendingRequests: wrapperspb.UInt32(0)}}}
		}, 503, "upstream_reset_before_response_started{overflow}", "UO"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := startWith(t, &stubProc{}, slow, setup{clusters: tt.cbs})
			first := make(chan response, 1)
			go func() { first <- e.do(t, "GET", "/", "", map[string]string{"X-Slow": "1"}) }()
			for slow.count() == 0 {
				time.Sleep(5 * time.Millisecond)
			}
			r := e.do(t, "GET", "/", "", nil)
			en := e.entry(t)
			if r.status != tt.wantStatus || en.Details != tt.wantDetails || en.Flags != tt.wantFlags {
				t.Errorf("second request: %d %q, details %q flags %q", r.status, r.body, en.Details, en.Flags)
			}
			release <- struct{}{}
			if r := <-first; r.status != 200 {
				t.Errorf("first request: %d %q", r.status, r.body)
			}
			e.entry(t)
			if r := e.do(t, "GET", "/", "", nil); r.status != 200 {
				t.Errorf("after the first ended: %d %q", r.status, r.body)
			}
			e.entry(t)
			slow.mu.Lock()
			slow.reqs = nil
			slow.mu.Unlock()
		})
	}
}
