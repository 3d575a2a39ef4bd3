package standin

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"modelgate/envoy"
	"modelgate/envoy/routing"
)

// These tests run the bootstrap package envoy generates, where the
// other tests of this package build their own: they check what the
// generator's choices do on Envoy's rules.

// startGenerated serves proc as the ext_proc server, generates the
// bootstrap for cfg (its ExtProcAddress set here), lets edit change it,
// and runs it.
func startGenerated(t *testing.T, cfg envoy.Config, proc extprocv3.ExternalProcessorServer,
	edit func(*bootstrapv3.Bootstrap), opts ...Option) *env {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	extprocv3.RegisterExternalProcessorServer(gs, proc)
	go gs.Serve(l)
	t.Cleanup(gs.Stop)
	cfg.ExtProcAddress, cfg.AccessLog = l.Addr().String(), envoy.AccessLogNone
	b, err := envoy.Bootstrap(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(b)
	}
	e := &env{logs: make(chan Entry, 100)}
	proxy, err := New(b, append([]Option{WithAccessLog(func(en Entry) { e.logs <- en })}, opts...)...)
	if err != nil {
		t.Fatalf("New(generated): %v", err)
	}
	srv := httptest.NewServer(proxy)
	t.Cleanup(func() { srv.Close(); proxy.Close() })
	e.url, e.proxy = srv.URL, proxy
	return e
}

// editHCM changes the generated connection manager.
func editHCM(t *testing.T, edit func(*hcmv3.HttpConnectionManager)) func(*bootstrapv3.Bootstrap) {
	return func(b *bootstrapv3.Bootstrap) {
		f := b.GetStaticResources().GetListeners()[0].GetFilterChains()[0].GetFilters()[0]
		hcm := &hcmv3.HttpConnectionManager{}
		if err := f.GetTypedConfig().UnmarshalTo(hcm); err != nil {
			t.Fatal(err)
		}
		edit(hcm)
		f.ConfigType = &listenerv3.Filter_TypedConfig{TypedConfig: mustAny(t, hcm)}
	}
}

// routeTo is a router-level ext_proc reply that sends the request to a
// backend, as the server does.
func routeTo(backend string) func(*extprocv3.ProcessingRequest) *extprocv3.ProcessingResponse {
	return func(req *extprocv3.ProcessingRequest) *extprocv3.ProcessingResponse {
		if req.GetRequestHeaders() == nil {
			return nil
		}
		return headersReply(&extprocv3.CommonResponse{ClearRouteCache: true, HeaderMutation: &extprocv3.HeaderMutation{
			SetHeaders: []*corev3.HeaderValueOption{setHeader("x-modelgate-backend", backend)}}})
	}
}

// A reasoning model whose answer takes 400s to start, with
// response_headers 900s: the generated bootstrap serves it with 200. The
// connection manager's idle timer sees nothing while the provider works
// (nothing crosses the codec or the filter chain), so before its idle
// timeout followed response_headers the same answer was cut at 310s with
// 504 "stream timeout", which the second case shows. The stream timers run
// on the test's clock.
func TestGeneratedSlowAnswer(t *testing.T) {
	for _, tt := range []struct {
		name       string
		idle       time.Duration // the connection manager's, 0 as generated
		wantStatus int
	}{
		{"as generated", 0, 200},
		{"with the old idle timeout", 310 * time.Second, 504},
	} {
		t.Run(tt.name, func(t *testing.T) {
			clock := newTimerClock()
			arrived, release := make(chan struct{}), make(chan struct{})
			up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				close(arrived)
				select {
				case <-release:
				case <-r.Context().Done():
					return
				}
				w.Header().Set("Content-Type", "application/json")
				w.Write([]byte(`{"answer":"after 400s"}`))
			}))
			t.Cleanup(up.Close)
			t.Cleanup(func() {
				select {
				case <-release:
				default:
					close(release)
				}
			})
			var edit func(*bootstrapv3.Bootstrap)
			if tt.idle > 0 {
				edit = editHCM(t, func(h *hcmv3.HttpConnectionManager) { h.StreamIdleTimeout = durationpb.New(tt.idle) })
			}
			e := startGenerated(t, envoy.Config{Routing: routing.Table{Backends: []routing.Backend{{Name: "up", BaseURL: up.URL,
				Timeouts: routing.Timeouts{ResponseHeaders: 900 * time.Second, StreamIdle: 300 * time.Second}}}}},
				&stubProc{reply: routeTo("up")}, edit, WithClock(clock))
			done := make(chan response, 1)
			go func() { done <- e.do(t, "POST", "/v1/chat/completions", `{"model":"o3"}`, nil) }()
			<-arrived
			clock.Advance(400 * time.Second)
			if tt.wantStatus == 200 {
				close(release)
			}
			r := <-done
			if r.status != tt.wantStatus {
				t.Fatalf("status %d %q, want %d", r.status, r.body, tt.wantStatus)
			}
			if en := e.entry(t); tt.wantStatus == 504 && en.Details != "stream_idle_timeout" {
				t.Errorf("details %q, want stream_idle_timeout", en.Details)
			}
		})
	}
}

// A fallback deployment on https://localhost:port reaches its provider:
// the generated bootstrap sends SNI "localhost" and verifies the SAN
// "localhost". The endpoint's hostname keeps the port, for the Host
// header; with auto_host_sni, which sends that hostname verbatim, and
// auto_sni_san_validation, every handshake failed, as the second case
// (the bootstrap as it was generated before) shows: all attempts fail and
// the client gets 503.
func TestGeneratedFallbackTLSOnAPort(t *testing.T) {
	caFile, cert := localhostCert(t)
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"host":"` + r.Host + `"}`))
	}))
	up.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	up.StartTLS()
	t.Cleanup(up.Close)
	_, port, _ := net.SplitHostPort(up.Listener.Addr().String())
	cfg := envoy.Config{CAFile: caFile, Routing: routing.Table{
		Backends: []routing.Backend{{Name: "tls", BaseURL: "https://localhost:" + port}},
		Models:   []routing.Model{{ID: fbModel, Fallback: &routing.Fallback{}, Deployments: []routing.Deployment{{Backend: "tls"}}}},
	}}
	autoSNI := func(b *bootstrapv3.Bootstrap) {
		for _, c := range b.GetStaticResources().GetClusters() {
			for _, m := range c.GetTransportSocketMatches() {
				m.TransportSocket.ConfigType = &corev3.TransportSocket_TypedConfig{TypedConfig: mustAny(t, &tlsv3.UpstreamTlsContext{
					AutoHostSni: true, AutoSniSanValidation: true,
					CommonTlsContext: &tlsv3.CommonTlsContext{ValidationContextType: &tlsv3.CommonTlsContext_ValidationContext{
						ValidationContext: &tlsv3.CertificateValidationContext{
							TrustedCa: &corev3.DataSource{Specifier: &corev3.DataSource_Filename{Filename: caFile}}}}},
				})}
			}
		}
	}
	for _, tt := range []struct {
		name       string
		edit       func(*bootstrapv3.Bootstrap)
		wantStatus int
	}{
		{"as generated", nil, 200},
		{"with auto_host_sni", autoSNI, 503},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d := &dualProc{router: &stubProc{reply: routeToModel}, up: &upstreamStub{}}
			e := startGenerated(t, cfg, d, tt.edit, WithBackOff(func(time.Duration) time.Duration { return 0 }))
			r := e.do(t, "POST", "/v1/chat/completions", `{"model":"m"}`, map[string]string{"Content-Type": "application/json"})
			if r.status != tt.wantStatus {
				t.Fatalf("status %d %q, want %d", r.status, r.body, tt.wantStatus)
			}
			if tt.wantStatus == 200 && r.body != `{"host":"localhost:`+port+`"}` {
				t.Errorf("the provider saw %s, want Host localhost:%s", r.body, port)
			}
		})
	}
}

// localhostCert makes a CA, writes it to a file, and issues a certificate
// for localhost only.
func localhostCert(t *testing.T) (caFile string, cert tls.Certificate) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	leafDER, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{SerialNumber: big.NewInt(2),
		Subject: pkix.Name{CommonName: "localhost"}, DNSNames: []string{"localhost"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, KeyUsage: x509.KeyUsageDigitalSignature}, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caFile = filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o644); err != nil {
		t.Fatal(err)
	}
	return caFile, tls.Certificate{Certificate: [][]byte{leafDER}, PrivateKey: key}
}

// A client's x-envoy-retry-on and x-envoy-max-retries never make Envoy
// retry a provider on a route without retries. Envoy's order, in the
// source of the v1.37.0 release (commit 6d9bb7d):
//   - source/common/http/conn_manager_utility.cc, mutateRequestHeaders:
//     the early header mutations run first (lines 97-101); then whether
//     the request is internal (234-236) and an edge request (246); a
//     request that is not internal goes through cleanInternalHeaders
//     (249-254), which removes the router's control headers from every
//     external request, edge or not (342-355);
//   - then the HTTP filters (conn_manager_impl.cc 1540-1577), ext_proc
//     among them, which may not touch x-envoy-* headers;
//   - then the router: source/common/router/router.cc reads the timeout
//     headers in decodeHeaders (FilterUtility::finalTimeout, 611-617),
//     applies the route's request_headers_to_remove (finalizeRequestHeaders,
//     629-630) and creates the retry state in continueDecodeHeaders
//     (807-809), where source/common/router/retry_state_impl.cc reads
//     x-envoy-retry-on and x-envoy-max-retries (108-113, 130-132).
//
// Without internal_address_config no request is internal (conn_manager_config.h
// 192-194), so Envoy itself strips them; with one that counts the client
// internal (as meshes configure), only the generated bootstrap's early
// header mutation does, which the last case takes out to show the retry
// it prevents.
func TestClientCannotSteerRetries(t *testing.T) {
	internal := func(h *hcmv3.HttpConnectionManager) {
		h.InternalAddressConfig = &hcmv3.HttpConnectionManager_InternalAddressConfig{
			CidrRanges: []*corev3.CidrRange{{AddressPrefix: "127.0.0.0", PrefixLen: wrapperspb.UInt32(8)}}}
	}
	noEarly := func(h *hcmv3.HttpConnectionManager) { internal(h); h.EarlyHeaderMutationExtensions = nil }
	for _, tt := range []struct {
		name      string
		edit      func(*hcmv3.HttpConnectionManager)
		wantTries int
	}{
		{"as generated", nil, 1},
		{"an internal client", internal, 1},
		{"an internal client, without the early header mutation", noEarly, 3},
	} {
		t.Run(tt.name, func(t *testing.T) {
			up := answering(503)
			srv := httptest.NewServer(up)
			t.Cleanup(srv.Close)
			var edit func(*bootstrapv3.Bootstrap)
			if tt.edit != nil {
				edit = editHCM(t, tt.edit)
			}
			// use_remote_address: the client is the connection's peer,
			// 127.0.0.1, which the internal cases count as internal.
			e := startGenerated(t, envoy.Config{UseRemoteAddress: true, Routing: routing.Table{Backends: []routing.Backend{{Name: "up", BaseURL: srv.URL}}}},
				&stubProc{reply: routeTo("up")}, edit, WithBackOff(func(time.Duration) time.Duration { return 0 }))
			r := e.do(t, "POST", "/v1/chat/completions", `{"model":"m"}`, map[string]string{
				"X-Envoy-Retry-On": "5xx", "X-Envoy-Max-Retries": "2"})
			if r.status != 503 || up.count() != tt.wantTries {
				t.Errorf("status %d, %d tries of the provider; want 503 after %d", r.status, up.count(), tt.wantTries)
			}
		})
	}
}

// timerClock is a TimerClock the test moves: timers due by then fire, in
// order, each in a goroutine of its own, as time.AfterFunc's do.
type timerClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*clockTimer
}

type clockTimer struct {
	c      *timerClock
	at     time.Time
	f      func()
	active bool
}

func newTimerClock() *timerClock {
	return &timerClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
}

func (c *timerClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *timerClock) After(d time.Duration) <-chan time.Time {
	ch := make(chan time.Time, 1)
	c.AfterFunc(d, func() { ch <- c.Now() })
	return ch
}

func (c *timerClock) AfterFunc(d time.Duration, f func()) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &clockTimer{c: c, at: c.now.Add(d), f: f, active: true}
	c.timers = append(c.timers, t)
	return t
}

func (t *clockTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := t.active
	t.active = false
	return was
}

func (t *clockTimer) Reset(d time.Duration) bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := t.active
	t.at, t.active = t.c.now.Add(d), true
	if !slices.Contains(t.c.timers, t) {
		t.c.timers = append(t.c.timers, t)
	}
	return was
}

// Advance moves the clock and fires the timers that came due.
func (c *timerClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	var due []*clockTimer
	for _, t := range c.timers {
		if t.active && !t.at.After(c.now) {
			t.active = false
			due = append(due, t)
		}
	}
	c.timers = slices.DeleteFunc(c.timers, func(t *clockTimer) bool { return !t.active })
	c.mu.Unlock()
	slices.SortFunc(due, func(a, b *clockTimer) int { return a.at.Compare(b.at) })
	for _, t := range due {
		go t.f()
	}
}

var _ TimerClock = (*timerClock)(nil)

// A storm of 429s from the first deployment while the second is healthy:
// with the generated retry budget every concurrent client's request moves
// to the second. Envoy's default budget (20% of the requests in flight, at
// least 3) let most of 40 clients see the 429; the second case shows it.
func TestGeneratedRetryBudgetCoversAStorm(t *testing.T) {
	const clients = 40
	for _, tt := range []struct {
		name   string
		budget float64
		// want is the clients answered 200; with Envoy's budget, how many
		// find a free retry slot depends on when the others' retries end,
		// so that case wants fewer than half.
		want int
	}{
		{"as generated", 0, clients},
		{"Envoy's 20%", 20, -1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var mu sync.Mutex
			arrived, all := 0, make(chan struct{})
			storm := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				if arrived++; arrived == clients {
					close(all)
				}
				mu.Unlock()
				select { // every client's first attempt is in flight before any fails
				case <-all:
				case <-time.After(30 * time.Second):
				}
				w.Header().Set("Retry-After", "0")
				w.WriteHeader(http.StatusTooManyRequests)
			}))
			t.Cleanup(storm.Close)
			healthy := httptest.NewServer(&upstreamRecorder{})
			t.Cleanup(healthy.Close)
			d := &dualProc{router: &stubProc{reply: routeToModel}, up: &upstreamStub{}}
			e := startGenerated(t, envoy.Config{Routing: routing.Table{
				Backends: []routing.Backend{{Name: "storm", BaseURL: storm.URL}, {Name: "healthy", BaseURL: healthy.URL}},
				Models: []routing.Model{{ID: fbModel,
					Fallback:    &routing.Fallback{BudgetPercent: tt.budget, Outlier: routing.Outlier{Consecutive: 1000}},
					Deployments: []routing.Deployment{{Backend: "storm"}, {Backend: "healthy", Priority: 1}}}},
			}}, d, nil, WithBackOff(func(time.Duration) time.Duration { return 0 }))
			var wg sync.WaitGroup
			statuses := make(chan int, clients)
			for range clients {
				wg.Add(1)
				go func() {
					defer wg.Done()
					statuses <- e.do(t, "POST", "/v1/chat/completions", `{"model":"m"}`, map[string]string{"Content-Type": "application/json"}).status
				}()
			}
			wg.Wait()
			close(statuses)
			ok := 0
			for s := range statuses {
				if s == 200 {
					ok++
				}
			}
			if tt.want >= 0 && ok != tt.want || tt.want < 0 && ok >= clients/2 {
				t.Errorf("%d of %d clients answered, want %d (-1: fewer than half)", ok, clients, tt.want)
			}
		})
	}
}
