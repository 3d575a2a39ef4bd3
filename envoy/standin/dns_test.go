package standin

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"modelgate/envoy"
	"modelgate/envoy/routing"
)

// A deployment whose DNS name resolves to two addresses is two hosts, as
// in Envoy's STRICT_DNS clusters: outlier detection ejects the failing
// address alone, and the same deployment goes on serving from the other
// one, never moving to the next priority.
func TestStrictDNSHostPerAddress(t *testing.T) {
	bad := &upstreamRecorder{handler: func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(503) }}
	good, next := &upstreamRecorder{}, &upstreamRecorder{}
	l1, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l1.Addr().(*net.TCPAddr).Port
	l2, err := net.Listen("tcp", net.JoinHostPort("127.0.0.2", strconv.Itoa(port)))
	if err != nil {
		l1.Close()
		t.Skipf("127.0.0.2:%d is not available here: %v", port, err)
	}
	for _, s := range []*httptest.Server{{Listener: l1, Config: &http.Server{Handler: bad}}, {Listener: l2, Config: &http.Server{Handler: good}}} {
		s.Start()
		t.Cleanup(s.Close)
	}
	other := httptest.NewServer(next)
	t.Cleanup(other.Close)
	resolve := func(_ context.Context, host string) ([]net.IPAddr, error) {
		if host == "provider.test" {
			return []net.IPAddr{{IP: net.ParseIP("127.0.0.1")}, {IP: net.ParseIP("127.0.0.2")}, {IP: net.ParseIP("::1")}}, nil
		}
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	cfg := envoy.Config{Routing: routing.Table{
		Backends: []routing.Backend{{Name: "multi", BaseURL: "http://provider.test:" + strconv.Itoa(port)}, {Name: "other", BaseURL: other.URL}},
		Models: []routing.Model{{ID: fbModel, Fallback: &routing.Fallback{Outlier: routing.Outlier{Consecutive: 1}},
			Deployments: []routing.Deployment{{Backend: "multi"}, {Backend: "other", Priority: 1}}}},
	}}
	d := &dualProc{router: &stubProc{reply: routeToModel}, up: &upstreamStub{}}
	e := startGenerated(t, cfg, d, nil, WithResolver(resolve), WithClock(newFakeClock()), WithRandom(zeroRandom),
		WithBackOff(func(time.Duration) time.Duration { return 0 }))
	hosts := e.proxy.plan.clusters[envoy.ModelCluster(fbModel)].lb.hosts
	var addrs []string
	for _, h := range hosts {
		addrs = append(addrs, h.addr)
	}
	want := []string{"127.0.0.1:" + strconv.Itoa(port), "127.0.0.2:" + strconv.Itoa(port), other.Listener.Addr().String()}
	if len(addrs) != 3 || addrs[0] != want[0] || addrs[1] != want[1] || addrs[2] != want[2] {
		t.Fatalf("hosts %v, want %v (IPv4 preferred: ::1 left out)", addrs, want)
	}
	if hosts[0].hostname != "provider.test:"+strconv.Itoa(port) || hosts[1].hostname != hosts[0].hostname {
		t.Errorf("hostnames %q, %q: want the endpoint's", hosts[0].hostname, hosts[1].hostname)
	}
	for i := range 4 {
		if r := e.do(t, "POST", "/v1/chat/completions", `{"model":"m"}`, map[string]string{"Content-Type": "application/json"}); r.status != 200 {
			t.Fatalf("request %d: %d %q", i, r.status, r.body)
		}
		e.entry(t)
	}
	if next.count() != 0 || good.count() != 4 || bad.count() > 1 {
		t.Errorf("calls: failing address %d, working address %d, next priority %d; want the failing one ejected after one "+
			"failure and the deployment still serving", bad.count(), good.count(), next.count())
	}
}
