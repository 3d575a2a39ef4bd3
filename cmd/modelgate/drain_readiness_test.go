package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"modelgate/authz"
	"modelgate/authz/sqlite"
	"modelgate/extproc/config"
)

// waitLog waits for serve's first JSON log line whose msg is msg and
// returns it.
func waitLog(t *testing.T, logs *syncBuffer, msg string) map[string]any {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		for _, l := range strings.Split(logs.String(), "\n") {
			var line map[string]any
			if json.Unmarshal([]byte(l), &line) == nil && line["msg"] == msg {
				return line
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no %q log line: %s", msg, logs.String())
	return nil
}

// readyz returns the admin listener's /readyz status and reason.
func readyz(t *testing.T, admin string) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + admin + "/readyz")
	if err != nil {
		t.Fatalf("GET /readyz: %v", err)
	}
	defer resp.Body.Close()
	var body struct{ Status, Reason string }
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatalf("GET /readyz: %v", err)
	}
	if (resp.StatusCode == 200) != (body.Status == "ready") {
		t.Errorf("GET /readyz: %d with status %q", resp.StatusCode, body.Status)
	}
	return resp.StatusCode, body.Reason
}

// grpcHealth returns the gRPC health status of service "" at addr.
func grpcHealth(t *testing.T, addr string) healthpb.HealthCheckResponse_ServingStatus {
	t.Helper()
	conn, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: ""})
	if err != nil {
		t.Fatalf("grpc.health.v1 Check: %v", err)
	}
	return resp.Status
}

// flakyStore is a SQLite store whose key lookups fail while it is down,
// as a database that went away would.
type flakyStore struct {
	*sqlite.Store
	down atomic.Bool
}

func (s *flakyStore) KeyByHash(ctx context.Context, hash [32]byte) (authz.Key, error) {
	if s.down.Load() {
		return authz.Key{}, errors.New("dial tcp 127.0.0.1:5432: connect: connection refused")
	}
	return s.Store.KeyByHash(ctx, hash)
}

// startGateway runs a gateway on store and returns its gRPC and admin
// addresses.
func startGateway(t *testing.T, cfgText string, store authz.Store, getenv func(string) string) (string, string) {
	t.Helper()
	cfg, err := config.Parse([]byte(cfgText))
	if err != nil {
		t.Fatal(err)
	}
	g, err := newGateway(cfg, store, getenv, newLogger(io.Discard))
	if err != nil {
		t.Fatal(err)
	}
	grpcL, adminL, err := listenPair("127.0.0.1:0", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.run(ctx, grpcL, adminL) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("the gateway ended with %v", err)
		}
	})
	return grpcL.Addr().String(), adminL.Addr().String()
}

func openSQLite(t *testing.T) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// /readyz and the gRPC health service follow the store: not ready while
// it does not answer, ready when it does; /healthz, liveness, stays 200.
func TestDrainReadinessFollowsTheStore(t *testing.T) {
	store := &flakyStore{Store: openSQLite(t)}
	grpcAddr, admin := startGateway(t, "", store, func(string) string { return "" })
	if code, reason := readyz(t, admin); code != 200 || reason != "" {
		t.Errorf("store up: /readyz %d %q, want 200", code, reason)
	}
	if st := grpcHealth(t, grpcAddr); st != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("store up: gRPC health %v, want SERVING", st)
	}

	store.down.Store(true)
	if code, reason := readyz(t, admin); code != 503 || reason != reasonStore {
		t.Errorf("store down: /readyz %d %q, want 503 %q", code, reason, reasonStore)
	}
	if st := grpcHealth(t, grpcAddr); st != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Errorf("store down: gRPC health %v, want NOT_SERVING", st)
	}
	resp, err := http.Get("http://" + admin + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("store down: /healthz %d, want 200 (liveness)", resp.StatusCode)
	}

	store.down.Store(false)
	if code, reason := readyz(t, admin); code != 200 {
		t.Errorf("store back: /readyz %d %q, want 200", code, reason)
	}
	if st := grpcHealth(t, grpcAddr); st != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("store back: gRPC health %v, want SERVING", st)
	}
}

// With rate limits in Redis, Redis that does not answer makes the gateway
// not ready when it fails closed (requests would get 503), not when it
// fails open (they are admitted).
func TestDrainReadinessFollowsRedisWhenFailingClosed(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refusing := l.Addr().String()
	l.Close() // nothing listens there now: connections are refused
	getenv := func(n string) string {
		if n == "DRAIN_REDIS_URL" {
			return "redis://" + refusing + "/0"
		}
		return ""
	}
	for _, tc := range []struct {
		failClosed bool
		code       int
		reason     string
	}{{true, 503, reasonLimiter}, {false, 200, ""}} {
		cfg := "rate_limits: {store: redis, redis_url_env: DRAIN_REDIS_URL, fail_closed: " + map[bool]string{true: "true", false: "false"}[tc.failClosed] + "}\n"
		_, admin := startGateway(t, cfg, openSQLite(t), getenv)
		if code, reason := readyz(t, admin); code != tc.code || reason != tc.reason {
			t.Errorf("fail_closed %v, Redis refusing: /readyz %d %q, want %d %q", tc.failClosed, code, reason, tc.code, tc.reason)
		}
	}
}

// gatedProxy forwards TCP connections to target once opened; until then
// it closes each at once, as a database that is not up yet would.
type gatedProxy struct {
	l      net.Listener
	target string
	open   chan struct{}
	mu     sync.Mutex
	conns  []net.Conn
}

func newGatedProxy(t *testing.T, target string) *gatedProxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &gatedProxy{l: l, target: target, open: make(chan struct{})}
	go p.serve()
	t.Cleanup(func() {
		l.Close()
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, c := range p.conns {
			c.Close()
		}
	})
	return p
}

func (p *gatedProxy) serve() {
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		select {
		case <-p.open:
		default:
			c.Close()
			continue
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, up)
		p.mu.Unlock()
		go func() { io.Copy(up, c); up.Close() }() //nolint:errcheck // either side closing ends both
		go func() { io.Copy(c, up); c.Close() }()  //nolint:errcheck // as above
	}
}

// serve keeps trying a PostgreSQL store it cannot reach, answering /readyz
// with 503 and gRPC health with NOT_SERVING meanwhile; once the database
// answers it serves, and /readyz answers 200.
func TestDrainServeWaitsForPostgreSQL(t *testing.T) {
	db := postgresSchema(t) // skips without a test database
	u, err := url.Parse(db)
	if err != nil || u.Host == "" {
		t.Skipf("%s is not a postgres:// URL", postgresURLEnv)
	}
	target := u.Host
	if u.Port() == "" {
		target = net.JoinHostPort(u.Hostname(), "5432")
	}
	proxy := newGatedProxy(t, target)
	u.Host = proxy.l.Addr().String()
	getenv := func(n string) string {
		if n == "DRAIN_PG_URL" {
			return u.String()
		}
		return ""
	}
	path := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(path, []byte("server: {grpc_listen: 127.0.0.1:0, admin_listen: 127.0.0.1:0}\nstorage: {postgres_url_env: DRAIN_PG_URL}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--config", path}, env{getenv: getenv, stdout: &logs, stderr: &logs})
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve ended with %v", err)
		}
	}()
	addrs := waitLog(t, &logs, "listening")
	admin, grpcAddr := addrs["admin"].(string), addrs["grpc"].(string)
	waitLog(t, &logs, "the store is unavailable; retrying")
	if code, reason := readyz(t, admin); code != 503 || reason != reasonStore {
		t.Errorf("database refusing: /readyz %d %q, want 503 %q", code, reason, reasonStore)
	}
	if st := grpcHealth(t, grpcAddr); st != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Errorf("database refusing: gRPC health %v, want NOT_SERVING", st)
	}

	close(proxy.open)
	waitLog(t, &logs, "serving")
	if code, reason := readyz(t, admin); code != 200 {
		t.Errorf("database up: /readyz %d %q, want 200", code, reason)
	}
	if st := grpcHealth(t, grpcAddr); st != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("database up: gRPC health %v, want SERVING", st)
	}
}

// server.shutdown_grace defaults to 10m and must be a duration between 1s
// and 24h.
func TestDrainShutdownGraceConfig(t *testing.T) {
	cfg, err := config.Parse([]byte(""))
	if err != nil || cfg.Server.ShutdownGrace.Duration != 10*time.Minute {
		t.Errorf("default shutdown_grace = %v, %v; want 10m", cfg.Server.ShutdownGrace, err)
	}
	if cfg, err := config.Parse([]byte("server: {shutdown_grace: 90s}")); err != nil || cfg.Server.ShutdownGrace.Duration != 90*time.Second {
		t.Errorf("shutdown_grace 90s = %v, %v", cfg.Server.ShutdownGrace, err)
	}
	for _, bad := range []string{"500ms", "25h", "-1m", "ten minutes", "600"} {
		_, err := config.Parse([]byte("server: {shutdown_grace: " + bad + "}"))
		if err == nil || !strings.Contains(err.Error(), "server.shutdown_grace") {
			t.Errorf("shutdown_grace %s: error %v, want one at server.shutdown_grace", bad, err)
		}
	}
	if _, err := config.Parse([]byte("server: {shutdown_grce: 1m}")); err == nil || !strings.Contains(err.Error(), "shutdown_grace") {
		t.Errorf("a misspelt shutdown_grace: error %v, want the known key suggested", err)
	}
}
