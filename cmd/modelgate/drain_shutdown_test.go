package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"modelgate/cmd/modelgate/wiring"
	"modelgate/envoy"
	"modelgate/envoy/standin"
	"modelgate/extproc/config"
)

// heldProvider is an OpenAI provider whose streams send their first chunk,
// then wait for release (or for the gateway to give up) before the rest.
type heldProvider struct {
	*httptest.Server
	started chan struct{} // a stream sent its first chunk
	release chan struct{} // closed: held streams finish
}

func newHeldProvider(t *testing.T) *heldProvider {
	t.Helper()
	p := &heldProvider{started: make(chan struct{}, 1), release: make(chan struct{})}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body) //nolint:errcheck // the request does not matter
		sseChunks(w, []string{chunkJSON(`{"role":"assistant","content":"Hel"}`, "")})
		p.started <- struct{}{}
		select {
		case <-p.release:
		case <-r.Context().Done():
			return
		}
		for _, e := range []string{chunkJSON(`{"content":"lo, drained"}`, ""), chunkJSON(`{}`, `"stop"`), usageJSON(), "[DONE]"} {
			fmt.Fprintf(w, "data: %s\n\n", e)
			w.(http.Flusher).Flush()
		}
	}))
	t.Cleanup(func() {
		select {
		case <-p.release:
		default:
			close(p.release)
		}
		p.Close()
	})
	return p
}

// drainServe is `modelgate serve` behind the Envoy stand-in, with a held
// provider and a key.
type drainServe struct {
	logs        syncBuffer
	cancel      context.CancelFunc // SIGTERM
	done        chan error
	grpc, admin string
	url, key    string // the stand-in's base URL
	db          string
	provider    *heldProvider
}

func startDrainServe(t *testing.T, serverExtra string) *drainServe {
	t.Helper()
	s := &drainServe{provider: newHeldProvider(t), done: make(chan error, 1)}
	dir := t.TempDir()
	s.db = filepath.Join(dir, "serve.db")
	path := filepath.Join(dir, "modelgate.yaml")
	cfgText := fmt.Sprintf(`server: {grpc_listen: 127.0.0.1:0, admin_listen: 127.0.0.1:0%s}
storage: {sqlite_path: %s}
backends: [{name: held, provider: openai, base_url: %q, api_key_env: DRAIN_PROVIDER_KEY}]
models: [{id: held, deployments: [{backend: held, model: held}]}]
`, serverExtra, s.db, s.provider.URL)
	if err := os.WriteFile(path, []byte(cfgText), 0o600); err != nil {
		t.Fatal(err)
	}
	getenv := func(n string) string {
		if n == "DRAIN_PROVIDER_KEY" {
			return "drain-provider-key"
		}
		return ""
	}
	var out bytes.Buffer
	if err := run(context.Background(), []string{"keys", "create", "--config", path, "--account", "drain"},
		env{getenv: getenv, stdout: &out, stderr: io.Discard}); err != nil {
		t.Fatal(err)
	}
	s.key = strings.TrimSpace(out.String())
	var ctx context.Context
	ctx, s.cancel = context.WithCancel(context.Background())
	go func() {
		s.done <- run(ctx, []string{"serve", "--config", path}, env{getenv: getenv, stdout: &s.logs, stderr: &s.logs})
	}()
	t.Cleanup(func() {
		s.cancel()
		select {
		case <-s.done:
		case <-time.After(time.Minute):
			t.Errorf("serve did not stop: %s", s.logs.String())
		}
	})
	line := waitLog(t, &s.logs, "serving")
	s.grpc, s.admin = line["grpc"].(string), line["admin"].(string)
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	ec := wiring.EnvoyConfig(cfg)
	ec.Listen, ec.ExtProcAddress = "127.0.0.1:0", s.grpc
	b, err := envoy.Bootstrap(ec)
	if err != nil {
		t.Fatal(err)
	}
	proxy, err := standin.New(b)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(proxy)
	t.Cleanup(func() { srv.Close(); proxy.Close() })
	s.url = srv.URL + "/v1"
	return s
}

// streamResult is what the client of a streamed chat saw.
type streamResult struct {
	status  int
	body    string
	readErr error
}

// startStream sends a streamed chat with request id id and returns once
// the provider has sent its first chunk; the result comes when the answer
// ends.
func (s *drainServe) startStream(t *testing.T, id string) <-chan streamResult {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, s.url+"/chat/completions", strings.NewReader(chatRequest("held", true)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+s.key)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Request-Id", id)
	res := make(chan streamResult, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			res <- streamResult{readErr: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		res <- streamResult{status: resp.StatusCode, body: string(b), readErr: err}
	}()
	select {
	case <-s.provider.started:
	case r := <-res:
		t.Fatalf("the stream ended before the provider started it: %+v (logs %s)", r, s.logs.String())
	}
	return res
}

// serveEnded waits for serve to return after SIGTERM.
func (s *drainServe) serveEnded(t *testing.T) {
	t.Helper()
	select {
	case err := <-s.done:
		s.done <- err // for the cleanup
		if err != nil {
			t.Errorf("serve ended with %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatalf("serve did not stop: %s", s.logs.String())
	}
}

// A stream open at SIGTERM finishes normally within the grace period and
// its usage reaches the ledger; meanwhile /readyz answers 503, gRPC health
// watchers are told NOT_SERVING and new connections are refused.
func TestDrainLetsOpenStreamsFinish(t *testing.T) {
	s := startDrainServe(t, "") // the default grace, 10m
	conn, err := grpc.NewClient("passthrough:///"+s.grpc, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	watch, err := healthpb.NewHealthClient(conn).Watch(ctx, &healthpb.HealthCheckRequest{Service: ""})
	if err != nil {
		t.Fatal(err)
	}
	if st, err := watch.Recv(); err != nil || st.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("gRPC health before SIGTERM: %v %v, want SERVING", st, err)
	}
	if code, reason := readyz(t, s.admin); code != 200 {
		t.Fatalf("/readyz before SIGTERM: %d %q", code, reason)
	}

	res := s.startStream(t, "drain-finishes")
	s.cancel()
	if line := waitLog(t, &s.logs, "draining"); line["open_streams"] != 1.0 {
		t.Errorf("draining log %v, want open_streams 1", line)
	}
	if code, reason := readyz(t, s.admin); code != 503 || reason != reasonDraining {
		t.Errorf("/readyz while draining: %d %q, want 503 %q", code, reason, reasonDraining)
	}
	if st, err := watch.Recv(); err != nil || st.Status != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Errorf("gRPC health while draining: %v %v, want NOT_SERVING", st, err)
	}
	if c, err := net.Dial("tcp", s.grpc); err == nil {
		c.Close()
		t.Errorf("a new connection to the ext_proc listener was accepted while draining")
	}

	close(s.provider.release)
	r := <-res
	if r.status != 200 || r.readErr != nil || !strings.Contains(r.body, "lo, drained") || !strings.Contains(r.body, "data: [DONE]") {
		t.Errorf("the drained stream: %d %v %q, want it whole", r.status, r.readErr, r.body)
	}
	s.serveEnded(t)
	if line := waitLog(t, &s.logs, "drained"); line["drained"] != 1.0 || line["cut"] != 0.0 {
		t.Errorf("drained log %v, want 1 drained and 0 cut", line)
	}
	row, ok := faultGateway{ledger: openLedger(t, s.db)}.row(t, "drain-finishes", 0)
	if !ok || row.Status != 200 || row.Tokens != 15 || row.Estimated {
		t.Errorf("the drained request's usage: %+v (found %v), want status 200 with the provider's 15 tokens", row, ok)
	}
}

// A stream that outlives the grace period is cut, logged as cut, and
// still charged (estimated).
func TestDrainCutsStreamsPastTheGrace(t *testing.T) {
	s := startDrainServe(t, ", shutdown_grace: 1s")
	res := s.startStream(t, "drain-cut")
	s.cancel()
	if line := waitLog(t, &s.logs, "draining"); line["open_streams"] != 1.0 {
		t.Errorf("draining log %v, want open_streams 1", line)
	}
	s.serveEnded(t)
	if line := waitLog(t, &s.logs, "drained"); line["drained"] != 0.0 || line["cut"] != 1.0 || line["level"] != "warn" {
		t.Errorf("drained log %v, want a warning with 0 drained and 1 cut", line)
	}
	var r streamResult
	select {
	case r = <-res:
	case <-time.After(time.Minute):
		t.Fatal("the cut stream did not end")
	}
	if strings.Contains(r.body, "[DONE]") || strings.Contains(r.body, "lo, drained") {
		t.Errorf("the cut stream: %d %v %q, want it broken off", r.status, r.readErr, r.body)
	}
	row, ok := faultGateway{ledger: openLedger(t, s.db)}.row(t, "drain-cut", 0)
	if !ok || !row.Estimated {
		t.Errorf("the cut request's usage: %+v (found %v), want an estimated record", row, ok)
	}
}

// What serve does after the grace fits the overhead deployments add to
// their stop timeouts (deploy/compose and deploy/kubernetes check theirs).
func TestShutdownOverheadCoversServe(t *testing.T) {
	if after := handlerExitTimeout + ledgerFlushTimeout + adminCloseTimeout; after > config.ShutdownOverhead {
		t.Errorf("serve may take %v after the grace; config.ShutdownOverhead is %v", after, config.ShutdownOverhead)
	}
}
