// Package extproctest is httptest for ext_proc servers: it starts a
// processor on a loopback gRPC listener behind the Envoy stand-in, or the
// real Envoy MODELGATE_TEST_ENVOY names (package envoytest), running the
// bootstrap modelgate generates, with fake upstreams, and returns what
// happened as plain values.
package extproctest

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sort"
	"sync"
	"testing"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"modelgate/envoy"
	"modelgate/envoy/envoytest"
	"modelgate/envoy/routing"
	"modelgate/envoy/standin"
)

// Config configures a Gateway.
type Config struct {
	// Backends are the upstreams by backend name.
	Backends map[string]http.Handler
	// BufferLimitBytes is Envoy's buffer limit; zero means the generator's
	// default.
	BufferLimitBytes uint32
	// Options adjust the stand-in (splitting, final chunk style). A real
	// Envoy cannot take them: with any, Start skips the test under one.
	Options []standin.Option
}

// Request is a request an upstream received.
type Request struct {
	Method, Path string
	Header       http.Header
	Body         []byte
}

// Result is one exchange as plain values.
type Result struct {
	Status int
	Header http.Header
	Body   []byte
	// Upstream lists what each backend received during the exchange.
	Upstream map[string][]Request
	// Log is the access log entry, with dynamic metadata: the stand-in's,
	// or read from a real Envoy's access log (envoytest.ParseAccessLogLine).
	Log standin.Entry
}

// Gateway is a running processor behind the stand-in or a real Envoy.
type Gateway struct {
	// URL is the client-facing base URL, without /v1.
	URL string

	mu        sync.Mutex
	upstreams map[string][]Request
	logs      chan standin.Entry
}

// Start starts proc behind the stand-in, or the real Envoy that
// MODELGATE_TEST_ENVOY names; everything stops at test cleanup.
func Start(t testing.TB, proc extprocv3.ExternalProcessorServer, cfg Config) *Gateway {
	t.Helper()
	g := &Gateway{upstreams: map[string][]Request{}, logs: make(chan standin.Entry, 1024)}
	ec := envoy.Config{Listen: "127.0.0.1:0", ExtProcAddress: serveGRPC(t, proc), BufferLimitBytes: cfg.BufferLimitBytes,
		AccessLog: envoy.AccessLogStdout} // a real Envoy's entries are read from there
	names := make([]string, 0, len(cfg.Backends))
	for name := range cfg.Backends {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		up := httptest.NewServer(g.record(name, cfg.Backends[name]))
		t.Cleanup(up.Close)
		ec.Routing.Backends = append(ec.Routing.Backends, routing.Backend{Name: name, BaseURL: up.URL})
	}
	b, err := envoy.Bootstrap(ec)
	if err != nil {
		t.Fatalf("generating the bootstrap: %v", err)
	}
	front := envoytest.Start(t, b, envoytest.WithAccessLog(func(e standin.Entry) { g.logs <- e }),
		envoytest.WithStandin("the test sets extproctest.Config.Options, which are stand-in options", cfg.Options...))
	g.URL = front.URL()
	return g
}

// ServerOptions are added to the options of every gRPC server this
// package starts; a package's tests may set them in an init function
// (extproc's tests install a codec that checks itself against protobuf).
var ServerOptions []grpc.ServerOption

func serveGRPC(t testing.TB, proc extprocv3.ExternalProcessorServer) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer(append([]grpc.ServerOption{grpc.MaxRecvMsgSize(64 << 20)}, ServerOptions...)...)
	extprocv3.RegisterExternalProcessorServer(s, proc)
	// The bootstrap health-checks the ext_proc cluster: a real Envoy
	// would otherwise count the server unhealthy (and reach it only
	// because a lone host in panic still gets traffic).
	healthpb.RegisterHealthServer(s, health.NewServer())
	go s.Serve(l) //nolint:errcheck // ends with Stop
	t.Cleanup(s.Stop)
	return l.Addr().String()
}

func (g *Gateway) record(name string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		g.mu.Lock()
		g.upstreams[name] = append(g.upstreams[name], Request{Method: r.Method, Path: r.URL.RequestURI(), Header: r.Header.Clone(), Body: body})
		g.mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(body))
		h.ServeHTTP(w, r)
	})
}

// Do sends req (whose URL is relative to the gateway, such as
// /v1/models) and returns the whole exchange.
func (g *Gateway) Do(t testing.TB, req *http.Request) Result {
	t.Helper()
	g.mu.Lock()
	g.upstreams = map[string][]Request{}
	g.mu.Unlock()
	u, _ := req.URL.Parse(g.URL + req.URL.RequestURI())
	req.URL, req.Host = u, u.Host
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the response: %v", err)
	}
	res := Result{Status: resp.StatusCode, Header: resp.Header, Body: body}
	select {
	case res.Log = <-g.logs:
	case <-time.After(5 * time.Second):
		t.Fatal("no access log entry")
	}
	g.mu.Lock()
	res.Upstream = g.upstreams
	g.mu.Unlock()
	return res
}

// Post is Do for a JSON POST with a bearer key ("" sends none).
func (g *Gateway) Post(t testing.TB, path, key, body string) Result {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, path, bytes.NewReader([]byte(body)))
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	return g.Do(t, req)
}
