package standin

import (
	"net/http/httptest"
	"testing"
	"time"

	"modelgate/envoy"
	"modelgate/envoy/routing"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/protobuf/types/known/structpb"
)

// The fallback topology the gateway generates (routing.Model.Fallback)
// runs: a 503 from the priority-0 deployment is retried on priority 1, each
// attempt's upstream ext_proc stream gets the chosen endpoint's metadata,
// the attempt count and, through forwarding_namespaces, what the
// router-level stream wrote as dynamic metadata (ext_proc.cc: metadata
// context on every message; the dynamic metadata is the request's, shared
// with upstream filters, upstream_request.cc).
func TestGeneratedFallback(t *testing.T) {
	p0, p1 := answering(503), &upstreamRecorder{}
	s0, s1 := httptest.NewServer(p0), httptest.NewServer(p1)
	t.Cleanup(s0.Close)
	t.Cleanup(s1.Close)
	router := &stubProc{reply: func(req *extprocv3.ProcessingRequest) *extprocv3.ProcessingResponse {
		if req.GetRequestHeaders() == nil {
			return nil
		}
		resp := routeToModel(req)
		resp.DynamicMetadata = &structpb.Struct{Fields: map[string]*structpb.Value{"io.modelgate": structpb.NewStructValue(
			&structpb.Struct{Fields: map[string]*structpb.Value{"path": structpb.NewStringValue("/v1/chat/completions")}})}}
		return resp
	}}
	d := &dualProc{router: router, up: &upstreamStub{}}
	e := startGenerated(t, envoy.Config{Routing: routing.Table{
		Backends: []routing.Backend{{Name: "b0", BaseURL: s0.URL}, {Name: "b1", BaseURL: s1.URL}},
		Models: []routing.Model{{ID: fbModel, Fallback: &routing.Fallback{},
			Deployments: []routing.Deployment{{Backend: "b0"}, {Backend: "b1", Priority: 1}}}},
	}}, d, nil, WithBackOff(func(time.Duration) time.Duration { return 0 }))
	fe := &fbEnv{env: e, router: router, up: d.up}
	r := fe.post(t)
	en := e.entry(t)
	if r.status != 200 || p0.count() != 1 || p1.count() != 1 || en.Attempts != 2 {
		t.Fatalf("response %d %q; P0 %d, P1 %d calls; attempts %d, details %q", r.status, r.body, p0.count(), p1.count(), en.Attempts, en.Details)
	}
	streams := d.up.all()
	if len(streams) != 2 {
		t.Fatalf("%d upstream streams", len(streams))
	}
	for i, s := range streams {
		first := s[0]
		attrs := first.GetAttributes()[attributesKey].GetFields()
		if n := attrs["upstream.request_attempt_count"].GetNumberValue(); n != float64(i+1) {
			t.Errorf("attempt %d: count %v", i+1, n)
		}
		if b := attrs[envoy.UpstreamAttributes("io.modelgate")[0]].GetStringValue(); b != "b"+string(rune('0'+i)) {
			t.Errorf("attempt %d: backend %q from %v", i+1, b, attrs)
		}
		for _, m := range s {
			if p := m.GetMetadataContext().GetFilterMetadata()["io.modelgate"].GetFields()["path"].GetStringValue(); p != "/v1/chat/completions" {
				t.Errorf("attempt %d: metadata_context %v, want the router-level stream's dynamic metadata", i+1, m.GetMetadataContext())
			}
		}
	}
	if p1.reqs[0].Header.Get("X-Modelgate-Model") != "" {
		t.Error("the route's request_headers_to_remove applies before the attempts")
	}
}

// Deployments on https and http backends: the generated cluster picks each
// endpoint's transport socket with transport_socket_matches
// (transport_socket_match_impl.cc), and https endpoints send and verify
// their backend's host name.
func TestGeneratedFallbackTLS(t *testing.T) {
	b, err := envoy.Bootstrap(envoy.Config{ExtProcAddress: "127.0.0.1:1", Routing: routing.Table{
		Backends: []routing.Backend{{Name: "tls", BaseURL: "https://api.example.com"}, {Name: "plain", BaseURL: "http://127.0.0.1:9"}},
		Models: []routing.Model{{ID: fbModel, Fallback: &routing.Fallback{},
			Deployments: []routing.Deployment{{Backend: "tls"}, {Backend: "plain", Priority: 1}}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(b)
	if err != nil {
		t.Fatalf("New(generated fallback): %v", err)
	}
	defer p.Close()
	hs := p.plan.clusters[envoy.ModelCluster(fbModel)].lb.hosts
	if len(hs) != 2 || hs[0].transport.TLSClientConfig == nil || hs[0].transport.TLSClientConfig.ServerName != "api.example.com" ||
		hs[1].transport.TLSClientConfig != nil {
		t.Errorf("hosts' TLS: %+v, %+v", hs[0].transport.TLSClientConfig, hs[1].transport.TLSClientConfig)
	}
}
