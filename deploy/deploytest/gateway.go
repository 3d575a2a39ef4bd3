// Package deploytest is what the mesh manifests' tests check against,
// taken from the Gateway's own code: the modelgate configs (config.Parse),
// the Envoy bootstrap generated from them (envoy.Bootstrap of
// wiring.EnvoyConfig), the routing header the ext_proc server really sets,
// and the Services of deploy/kubernetes; the paths of the config's models
// with the rule their timeouts set for every timer on the way
// (timeouts.go), and the headers to remove before routing (headers.go).
// Paths are relative to a test package one folder below deploy/.
package deploytest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	extprocsvc "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	corev1 "k8s.io/api/core/v1"

	"modelgate/authz"
	"modelgate/authz/ledger"
	"modelgate/cmd/modelgate/wiring"
	"modelgate/deploy"
	"modelgate/envoy"
	"modelgate/envoy/routing"
	"modelgate/extproc"
	"modelgate/extproc/config"
)

// Paths of what the manifests must agree with.
const (
	ComposeConfig   = "../compose/modelgate.yaml"
	ComposeEnvoy    = "../../envoy/envoy.yaml"
	KubernetesDir   = "../kubernetes"
	ConfigMapKey    = "modelgate.yaml"
	ClusterDNSZone  = "svc.cluster.local"
	ExtProcFilterID = "envoy.filters.http.ext_proc"
)

// Gateway is what modelgate expects of the Envoy in front of it.
type Gateway struct {
	// cfg is the config modelgate runs with in the cluster (the ConfigMap
	// of ../kubernetes) and boot the bootstrap generated from it.
	Cfg  *config.Config
	Boot *bootstrapv3.Bootstrap
	// extProcs are the ext_proc filters of the bootstraps of the cluster
	// config and of deploy/compose/modelgate.yaml.
	ExtProcs map[string]*extprocv3.ExternalProcessor
	// routingHeader is the header the ext_proc server sets to the backend.
	RoutingHeader string
	// services are the Services of ../kubernetes by namespace/name.
	Services map[string]*corev1.Service
}

// LoadGateway gathers the expectations once per test.
func LoadGateway(t *testing.T) *Gateway {
	t.Helper()
	kobjs := DecodeDir(t, KubernetesDir)
	cfg, cfgYAML := ClusterConfig(t, kobjs)
	gw := &Gateway{Cfg: cfg, ExtProcs: map[string]*extprocv3.ExternalProcessor{}, Services: map[string]*corev1.Service{}}
	var err error
	if gw.Boot, err = envoy.Bootstrap(wiring.EnvoyConfig(cfg)); err != nil {
		t.Fatalf("the bootstrap of the ConfigMap's config (%s): %v", cfgYAML, err)
	}
	compose, err := config.Load(ComposeConfig)
	if err != nil {
		t.Fatal(err)
	}
	composeBoot, err := envoy.Bootstrap(wiring.EnvoyConfig(compose))
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string]*bootstrapv3.Bootstrap{"ConfigMap " + cfgYAML: gw.Boot, ComposeConfig: composeBoot} {
		if gw.ExtProcs[name], err = ExtProcOf(b); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	gw.RoutingHeader = ProbeRoutingHeader(t)
	routes, _ := BackendRoutes(gw.Boot)
	for _, r := range routes {
		if h := r.GetMatch().GetHeaders(); len(h) == 0 || h[0].GetName() != gw.RoutingHeader {
			t.Fatalf("bootstrap route %q does not match first on %q, the header the ext_proc server sets", r.GetName(), gw.RoutingHeader)
		}
	}
	for _, s := range deploy.Find[*corev1.Service](kobjs) {
		gw.Services[s.Namespace+"/"+s.Name] = s
	}
	return gw
}

// DecodeDir decodes every .yaml file of a directory with the shared
// strict decoder.
func DecodeDir(t *testing.T, dir string) []deploy.Object {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no manifests in %s (%v)", dir, err)
	}
	var objs []deploy.Object
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		o, err := deploy.Decode(data)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		objs = append(objs, o...)
	}
	return objs
}

// ClusterConfig parses the modelgate config of the one ConfigMap holding
// modelgate.yaml.
func ClusterConfig(t *testing.T, objs []deploy.Object) (*config.Config, string) {
	t.Helper()
	var found []*corev1.ConfigMap
	for _, cm := range deploy.Find[*corev1.ConfigMap](objs) {
		if _, ok := cm.Data[ConfigMapKey]; ok {
			found = append(found, cm)
		}
	}
	if len(found) != 1 {
		t.Fatalf("want one ConfigMap with %s in %s, got %d", ConfigMapKey, KubernetesDir, len(found))
	}
	cfg, err := config.Parse([]byte(found[0].Data[ConfigMapKey]))
	if err != nil {
		t.Fatalf("ConfigMap %s: %v", found[0].Name, err)
	}
	return cfg, found[0].Namespace + "/" + found[0].Name
}

func ListenerOf(b *bootstrapv3.Bootstrap) *listenerv3.Listener {
	if ls := b.GetStaticResources().GetListeners(); len(ls) == 1 {
		return ls[0]
	}
	return nil
}

func HCMOf(b *bootstrapv3.Bootstrap) *hcmv3.HttpConnectionManager {
	for _, fc := range ListenerOf(b).GetFilterChains() {
		for _, f := range fc.GetFilters() {
			m, err := f.GetTypedConfig().UnmarshalNew()
			if h, ok := m.(*hcmv3.HttpConnectionManager); err == nil && ok {
				return h
			}
		}
	}
	return nil
}

func ExtProcOf(b *bootstrapv3.Bootstrap) (*extprocv3.ExternalProcessor, error) {
	for _, f := range HCMOf(b).GetHttpFilters() {
		if f.GetName() != ExtProcFilterID {
			continue
		}
		m, err := f.GetTypedConfig().UnmarshalNew()
		if err != nil {
			return nil, err
		}
		if ep, ok := m.(*extprocv3.ExternalProcessor); ok {
			return ep, nil
		}
	}
	return nil, errors.New("the bootstrap has no ext_proc filter")
}

// ClusterOf returns the bootstrap's cluster of that name.
func ClusterOf(b *bootstrapv3.Bootstrap, name string) *clusterv3.Cluster {
	for _, c := range b.GetStaticResources().GetClusters() {
		if c.GetName() == name {
			return c
		}
	}
	return nil
}

// Upstream is where a bootstrap cluster sends requests.
type Upstream struct {
	Host string
	Port uint32
	// SNI and SAN are the TLS server name and the verified subject alt
	// name; empty for plain HTTP.
	SNI, SAN string
}

func UpstreamOf(c *clusterv3.Cluster) (Upstream, error) {
	var u Upstream
	eps := c.GetLoadAssignment().GetEndpoints()
	if len(eps) != 1 || len(eps[0].GetLbEndpoints()) != 1 {
		return u, fmt.Errorf("cluster %s: want one endpoint", c.GetName())
	}
	sa := eps[0].GetLbEndpoints()[0].GetEndpoint().GetAddress().GetSocketAddress()
	u.Host, u.Port = sa.GetAddress(), sa.GetPortValue()
	if ts := c.GetTransportSocket(); ts != nil {
		m, err := ts.GetTypedConfig().UnmarshalNew()
		if err != nil {
			return u, err
		}
		tc, ok := m.(*tlsv3.UpstreamTlsContext)
		if !ok {
			return u, fmt.Errorf("cluster %s: transport socket %T", c.GetName(), m)
		}
		u.SNI = tc.GetSni()
		for _, s := range tc.GetCommonTlsContext().GetValidationContext().GetMatchTypedSubjectAltNames() {
			u.SAN = s.GetMatcher().GetExact()
		}
	}
	return u, nil
}

// BackendRoutes are the bootstrap's routes to a backend (not the
// catch-all's direct response), and notFound is that catch-all.
func BackendRoutes(b *bootstrapv3.Bootstrap) (routes []*routev3.Route, notFound *routev3.Route) {
	for _, vh := range HCMOf(b).GetRouteConfig().GetVirtualHosts() {
		for _, r := range vh.GetRoutes() {
			if r.GetDirectResponse() != nil {
				notFound = r
			} else {
				routes = append(routes, r)
			}
		}
	}
	return routes, notFound
}

// GRPCPort is the port of the config's ext_proc listener.
func GRPCPort(cfg *config.Config) (int32, error) {
	_, p, err := net.SplitHostPort(cfg.Server.GRPCListen)
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseUint(p, 10, 16)
	return int32(n), err
}

// ProbeRoutingHeader runs the real ext_proc server on one chat request
// and returns the header it sets to the chosen backend's name.
func ProbeRoutingHeader(t *testing.T) string {
	t.Helper()
	const backend, model = "probe-backend", "probe-model"
	srv, err := extproc.New(extproc.Config{
		Routing: routing.Table{Backends: []routing.Backend{{Name: backend, Provider: "openai"}},
			Models: []routing.Model{{ID: model, Deployments: []routing.Deployment{{Backend: backend, Model: model}}}}},
		Credentials: map[string]extproc.Credentials{backend: {APIKey: "upstream-key"}},
	}, allowAll{}, allowAll{})
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"model":"` + model + `","messages":[{"role":"user","content":"hi"}]}`)
	s := &stream{ctx: t.Context(), in: []*extprocsvc.ProcessingRequest{
		{Request: &extprocsvc.ProcessingRequest_RequestHeaders{RequestHeaders: &extprocsvc.HttpHeaders{Headers: headerMap(
			":method", "POST", ":path", "/v1/chat/completions", ":authority", "llm.example.com",
			"authorization", "Bearer sk-probe", "content-type", "application/json",
			"content-length", strconv.Itoa(len(body)))}}},
		{Request: &extprocsvc.ProcessingRequest_RequestBody{RequestBody: &extprocsvc.HttpBody{Body: body, EndOfStream: true}}},
	}}
	if err := srv.Process(s); err != nil {
		t.Fatalf("ext_proc server: %v", err)
	}
	for _, r := range s.out {
		for _, h := range r.GetRequestBody().GetResponse().GetHeaderMutation().GetSetHeaders() {
			if v := h.GetHeader(); string(v.GetRawValue()) == backend || v.GetValue() == backend {
				return v.GetKey()
			}
		}
	}
	t.Fatalf("the ext_proc server set no header to %q; its replies: %v", backend, s.out)
	return ""
}

func headerMap(kv ...string) *corev3.HeaderMap {
	m := &corev3.HeaderMap{}
	for i := 0; i < len(kv); i += 2 {
		m.Headers = append(m.Headers, &corev3.HeaderValue{Key: kv[i], RawValue: []byte(kv[i+1])})
	}
	return m
}

// allowAll authenticates every key and records nothing.
type allowAll struct{}

func (allowAll) Authenticate(context.Context, string) (*authz.Principal, error) {
	return &authz.Principal{KeyID: "k", AccountID: "a"}, nil
}
func (allowAll) AppendUsage(context.Context, ledger.UsageRecord) error { return nil }

// stream plays Envoy's side of one ext_proc stream.
type stream struct {
	grpc.ServerStream
	ctx context.Context
	in  []*extprocsvc.ProcessingRequest
	out []*extprocsvc.ProcessingResponse
}

func (s *stream) Context() context.Context { return s.ctx }
func (s *stream) Send(r *extprocsvc.ProcessingResponse) error {
	s.out = append(s.out, r)
	return nil
}
func (s *stream) Recv() (*extprocsvc.ProcessingRequest, error) {
	if len(s.in) == 0 {
		return nil, io.EOF
	}
	r := s.in[0]
	s.in = s.in[1:]
	return r, nil
}

// Drift is one deliberate mistake in a manifest and what the checks must
// say of it: Old, in File, becomes New, and the errors contain Want.
type Drift struct {
	Name, File, Old, New, Want string
}

// CheckDrifts applies each drift to a copy of files and requires check to
// report it, so that every check is seen to fail.
func CheckDrifts(t *testing.T, files map[string][]byte, check func(files map[string][]byte) []error, drifts []Drift) {
	t.Helper()
	for _, d := range drifts {
		t.Run(d.Name, func(t *testing.T) {
			if !bytes.Contains(files[d.File], []byte(d.Old)) {
				t.Fatalf("%s has no %q", d.File, d.Old)
			}
			changed := maps.Clone(files)
			changed[d.File] = bytes.Replace(files[d.File], []byte(d.Old), []byte(d.New), 1)
			err := errors.Join(check(changed)...)
			if err == nil || !strings.Contains(err.Error(), d.Want) {
				t.Errorf("after %q → %q in %s: got %v, want an error with %q", d.Old, d.New, d.File, err, d.Want)
				return
			}
			t.Logf("reported: %v", err)
		})
	}
}

// WithBackends returns a copy of the cluster config with a backend for
// each name of extra: an openai-kind backend at that upstream, with the
// config's default timeouts (a provider a manifest shows as an example
// beside the config's own). Names the config has already are left as
// they are.
func (gw *Gateway) WithBackends(extra map[string]Upstream) (*config.Config, error) {
	cfg := *gw.Cfg
	cfg.Backends = slices.Clone(cfg.Backends)
	for _, name := range slices.Sorted(maps.Keys(extra)) {
		if slices.ContainsFunc(cfg.Backends, func(b config.Backend) bool { return b.Name == name }) {
			continue
		}
		u := extra[name]
		scheme := "http"
		if u.SNI != "" {
			scheme = "https"
		}
		def, err := config.Parse([]byte(fmt.Sprintf("backends: [{name: %q, provider: openai, base_url: %q}]\n", name, scheme+"://"+u.Host)))
		if err != nil {
			return nil, fmt.Errorf("backend %q: %w", name, err)
		}
		b := def.Backends[0]
		b.BaseURL = scheme + "://" + net.JoinHostPort(u.Host, strconv.Itoa(int(u.Port)))
		cfg.Backends = append(cfg.Backends, b)
	}
	return &cfg, nil
}

// HeaderKey is a route's header matches as one comparable string: the
// name=value pairs, sorted.
func HeaderKey(h map[string]string) string {
	var kv []string
	for k, v := range h {
		kv = append(kv, k+"="+v)
	}
	slices.Sort(kv)
	return strings.Join(kv, ",")
}
