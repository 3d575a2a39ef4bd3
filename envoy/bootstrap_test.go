package envoy

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"modelgate/envoy/routing"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	upstreamsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
)

// testConfig has an https backend on a hostname and an http one on an IP.
var testConfig = Config{
	ExtProcAddress: "modelgate:50051",
	Routing: routing.Table{Backends: []routing.Backend{
		{Name: "openai-main", BaseURL: "https://api.openai.com"},
		{Name: "local", BaseURL: "http://127.0.0.1:11434"},
	}},
}

func generate(t *testing.T, cfg Config) *bootstrapv3.Bootstrap {
	t.Helper()
	b, err := Bootstrap(cfg)
	if err != nil {
		t.Fatalf("Bootstrap(%+v): %v", cfg, err)
	}
	return b
}

// unpack unmarshals a into m, failing the test if a holds something else.
func unpack[M proto.Message](t *testing.T, a *anypb.Any, m M) M {
	t.Helper()
	if err := a.UnmarshalTo(m); err != nil {
		t.Fatalf("unpacking %s into %T: %v", a.GetTypeUrl(), m, err)
	}
	return m
}

func hcmOf(t *testing.T, b *bootstrapv3.Bootstrap) *hcmv3.HttpConnectionManager {
	t.Helper()
	return unpack(t, b.GetStaticResources().GetListeners()[0].GetFilterChains()[0].GetFilters()[0].GetTypedConfig(), &hcmv3.HttpConnectionManager{})
}

func clusterNamed(t *testing.T, b *bootstrapv3.Bootstrap, name string) *clusterv3.Cluster {
	t.Helper()
	for _, c := range b.GetStaticResources().GetClusters() {
		if c.GetName() == name {
			return c
		}
	}
	t.Fatalf("no cluster %q", name)
	return nil
}

// endpointOf is the address of a cluster's only endpoint.
func endpointOf(c *clusterv3.Cluster) *corev3.SocketAddress {
	return c.GetLoadAssignment().GetEndpoints()[0].GetLbEndpoints()[0].GetEndpoint().GetAddress().GetSocketAddress()
}

func TestHTTPFilters(t *testing.T) {
	t.Parallel()
	filters := hcmOf(t, generate(t, testConfig)).GetHttpFilters()
	var names []string
	for _, f := range filters {
		names = append(names, f.GetName())
	}
	if diff := cmp.Diff([]string{"envoy.filters.http.ext_proc", "envoy.filters.http.router"}, names); diff != "" {
		t.Fatalf("filter order (-want +got):\n%s", diff)
	}
	want := &extprocv3.ExternalProcessor{
		GrpcService: &corev3.GrpcService{TargetSpecifier: &corev3.GrpcService_EnvoyGrpc_{
			EnvoyGrpc: &corev3.GrpcService_EnvoyGrpc{ClusterName: "modelgate_extproc"},
		}},
		ProcessingMode: &extprocv3.ProcessingMode{
			RequestHeaderMode:   extprocv3.ProcessingMode_SEND,
			RequestBodyMode:     extprocv3.ProcessingMode_BUFFERED,
			RequestTrailerMode:  extprocv3.ProcessingMode_SKIP,
			ResponseHeaderMode:  extprocv3.ProcessingMode_SEND,
			ResponseBodyMode:    extprocv3.ProcessingMode_BUFFERED,
			ResponseTrailerMode: extprocv3.ProcessingMode_SKIP,
		},
		AllowModeOverride: true,
		FailureModeAllow:  false,
		MessageTimeout:    durationpb.New(10 * time.Second),
		MetadataOptions: &extprocv3.MetadataOptions{ReceivingNamespaces: &extprocv3.MetadataOptions_MetadataNamespaces{
			Untyped: []string{"io.modelgate"},
		}},
	}
	got := unpack(t, filters[0].GetTypedConfig(), &extprocv3.ExternalProcessor{})
	if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
		t.Errorf("ext_proc filter (-want +got):\n%s", diff)
	}
	router := unpack(t, filters[1].GetTypedConfig(), &routerv3.Router{})
	if diff := cmp.Diff(&routerv3.Router{SuppressEnvoyHeaders: true}, router, protocmp.Transform()); diff != "" {
		t.Errorf("router (-want +got):\n%s", diff)
	}
}

func TestListenerDefaults(t *testing.T) {
	t.Parallel()
	b := generate(t, testConfig)
	l := b.GetStaticResources().GetListeners()[0]
	wantAddr := &corev3.SocketAddress{Address: "0.0.0.0", PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: 8080}}
	if diff := cmp.Diff(wantAddr, l.GetAddress().GetSocketAddress(), protocmp.Transform()); diff != "" {
		t.Errorf("listener address (-want +got):\n%s", diff)
	}
	hcm := hcmOf(t, b)
	type settings struct {
		StatPrefix                         string
		StreamIdleTimeout, RequestTimeout  time.Duration
		RequestTimeoutSet, GenerateIDIsSet bool
	}
	got := settings{hcm.GetStatPrefix(), hcm.GetStreamIdleTimeout().AsDuration(), hcm.GetRequestTimeout().AsDuration(),
		hcm.GetRequestTimeout() != nil, hcm.GetGenerateRequestId() != nil}
	// generate_request_id stays unset: Envoy's default is on.
	want := settings{"modelgate", 300 * time.Second, 120 * time.Second, true, false}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("connection manager (-want +got):\n%s", diff)
	}
	limits := map[string]uint32{"listener": l.GetPerConnectionBufferLimitBytes().GetValue()}
	wantLimits := map[string]uint32{"listener": 32 << 20}
	for _, c := range b.GetStaticResources().GetClusters() {
		limits[c.GetName()] = c.GetPerConnectionBufferLimitBytes().GetValue()
		wantLimits[c.GetName()] = 32 << 20
	}
	if diff := cmp.Diff(wantLimits, limits); diff != "" {
		t.Errorf("buffer limits (-want +got):\n%s", diff)
	}
}

func TestBackendRoute(t *testing.T) {
	t.Parallel()
	routes := hcmOf(t, generate(t, testConfig)).GetRouteConfig().GetVirtualHosts()[0].GetRoutes()
	if len(routes) != 3 {
		t.Fatalf("got %d routes, want 2 backends and the catch-all", len(routes))
	}
	want := &routev3.Route{
		Name: "openai-main",
		Match: &routev3.RouteMatch{
			PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"},
			Headers: []*routev3.HeaderMatcher{{Name: "x-modelgate-backend", HeaderMatchSpecifier: &routev3.HeaderMatcher_StringMatch{
				StringMatch: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: "openai-main"}},
			}}},
		},
		Action: &routev3.Route_Route{Route: &routev3.RouteAction{
			ClusterSpecifier:     &routev3.RouteAction_Cluster{Cluster: "openai-main"},
			Timeout:              durationpb.New(0),
			HostRewriteSpecifier: &routev3.RouteAction_HostRewriteLiteral{HostRewriteLiteral: "api.openai.com"},
		}},
		RequestHeadersToRemove: []string{"x-modelgate-backend", "x-modelgate-model", "x-modelgate-stream"},
	}
	if diff := cmp.Diff(want, routes[0], protocmp.Transform()); diff != "" {
		t.Errorf("first route (-want +got):\n%s", diff)
	}
	if got := routes[1].GetRoute(); got.GetCluster() != "local" || got.GetTimeout() == nil || got.GetTimeout().AsDuration() != 0 {
		t.Errorf("second route action = %v, want cluster local with timeout 0s", got)
	}
}

// openAIError is the error body of the OpenAI API.
type openAIError struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    string  `json:"code"`
	} `json:"error"`
}

func TestNotFoundRoute(t *testing.T) {
	t.Parallel()
	routes := hcmOf(t, generate(t, testConfig)).GetRouteConfig().GetVirtualHosts()[0].GetRoutes()
	last := routes[len(routes)-1]
	if last.GetMatch().GetPrefix() != "/" || len(last.GetMatch().GetHeaders()) != 0 || last.GetDirectResponse().GetStatus() != 404 {
		t.Fatalf("last route = %v, want a 404 direct_response matching every path", last)
	}
	wantHeaders := []*corev3.HeaderValueOption{{
		Header:       &corev3.HeaderValue{Key: "content-type", Value: "application/json"},
		AppendAction: corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD,
	}}
	if diff := cmp.Diff(wantHeaders, last.GetResponseHeadersToAdd(), protocmp.Transform()); diff != "" {
		t.Errorf("response_headers_to_add (-want +got):\n%s", diff)
	}
	body := last.GetDirectResponse().GetBody().GetInlineString()
	dec := json.NewDecoder(strings.NewReader(body))
	dec.DisallowUnknownFields()
	var got openAIError
	if err := dec.Decode(&got); err != nil {
		t.Fatalf("body %s is not an OpenAI error: %v", body, err)
	}
	if got.Error.Message == "" || got.Error.Type != "invalid_request_error" || got.Error.Code != "unknown_url" ||
		got.Error.Param != nil || !strings.Contains(body, `"param":null`) {
		t.Errorf("body = %s, want message, type invalid_request_error, param null, code unknown_url", body)
	}
}

func TestExtProcCluster(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, address, wantHost string
		wantType                clusterv3.Cluster_DiscoveryType
	}{
		{"hostname", "modelgate:50051", "modelgate", clusterv3.Cluster_STRICT_DNS},
		{"IPv4", "10.0.0.5:50051", "10.0.0.5", clusterv3.Cluster_STATIC},
		{"IPv6", "[::1]:50051", "::1", clusterv3.Cluster_STATIC},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := clusterNamed(t, generate(t, Config{ExtProcAddress: tt.address}), "modelgate_extproc")
			got := unpack(t, c.GetTypedExtensionProtocolOptions()[httpProtocolOptionsKey], &upstreamsv3.HttpProtocolOptions{})
			if got.GetExplicitHttpConfig().GetHttp2ProtocolOptions() == nil {
				t.Errorf("protocol options = %v, want explicit HTTP/2", got)
			}
			if c.GetType() != tt.wantType {
				t.Errorf("type = %v, want %v", c.GetType(), tt.wantType)
			}
			want := &corev3.SocketAddress{Address: tt.wantHost, PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: 50051}}
			if diff := cmp.Diff(want, endpointOf(c), protocmp.Transform()); diff != "" {
				t.Errorf("endpoint (-want +got):\n%s", diff)
			}
		})
	}
}
